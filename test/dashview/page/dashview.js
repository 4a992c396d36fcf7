// dashview draws one dashboard of deploy/grafana as Grafana 7.5 (Plutono) would lay it out, from
// Prometheus' HTTP API, and reports what each panel showed. It is a stand-in for Plutono, which cannot
// run here: it checks what the panels show (data, units, empty tables, the annotations' marks), not
// Plutono's own rendering.
//
// The page is opened as /?dashboard=<file>&from=<unix s>&to=<unix s>&scrape=<s>&var-<name>=<value>...
// It fetches /dashboards/<file> and queries /api/v1/query and /api/v1/query_range (the server in front
// of it proxies Prometheus), draws every panel at its gridPos, and when done sets window.dashviewReport
// (one entry per panel and annotation: state "data", "empty" or "error") and window.dashviewDone.
'use strict';

const params = new URLSearchParams(location.search);
const FROM = Number(params.get('from'));
const TO = Number(params.get('to'));
const SCRAPE = Number(params.get('scrape') || 15);
const WIDTH = 1600; // the grid's width in pixels: 24 columns
const CELL = 30; // Grafana's grid cell height
const MARGIN = 8; // and the gap between panels
const PALETTE = ['#7EB26D', '#EAB839', '#6ED0E0', '#EF843C', '#E24D42', '#1F78C1', '#BA43A9', '#705DA0',
  '#508642', '#CCA300', '#447EBC', '#C15C17', '#890F02', '#0A437C', '#6D1F62', '#584477'];

const vars = {};
for (const [k, v] of params) {
  if (k.startsWith('var-')) vars[k.slice(4)] = v;
}

// expand replaces $name, ${name} and [[name]] as Grafana does; a name it does not know stays.
function expand(s, extra) {
  const all = Object.assign({}, vars, extra || {});
  return s.replace(/\$\{(\w+)\}|\[\[(\w+)\]\]|\$(\w+)/g, (m, a, b, c) => {
    const name = a || b || c;
    return name in all ? all[name] : m;
  });
}

// intervals returns Grafana's built-in variables of a panel pixels wide: the step is the range over the
// pixels, at least the panel's minimum interval (or the scrape interval), in whole seconds.
function intervals(pixels, minInterval) {
  const range = TO - FROM;
  const step = Math.max(Math.ceil(range / Math.max(pixels, 1)), parseDuration(minInterval) || SCRAPE, 1);
  return {
    step,
    vars: {
      __interval: step + 's', __interval_ms: String(step * 1000),
      __rate_interval: Math.max(step + SCRAPE, 4 * SCRAPE) + 's',
      __range: range + 's', __range_s: String(range), __range_ms: String(range * 1000),
    },
  };
}

function parseDuration(d) {
  const m = /^(\d+)(ms|s|m|h)$/.exec(d || '');
  if (!m) return 0;
  return Number(m[1]) * { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2]];
}

async function api(path, query) {
  const resp = await fetch(path + '?' + new URLSearchParams(query));
  const body = await resp.json().catch(() => ({ status: 'error', error: 'HTTP ' + resp.status }));
  if (body.status !== 'success') throw new Error(body.error || 'HTTP ' + resp.status);
  return body.data;
}

// series queries expr over the range at step (or at the end when instant) and returns
// [{metric, points: [[t, v]...]}].
async function series(expr, step, instant) {
  if (instant) {
    const data = await api('/api/v1/query', { query: expr, time: TO });
    if (data.resultType === 'scalar') return [{ metric: {}, points: [[data.result[0], Number(data.result[1])]] }];
    return data.result.map(r => ({ metric: r.metric, points: [[r.value[0], Number(r.value[1])]] }));
  }
  // Grafana aligns its points to multiples of the step, and so leaves out the last partial step; the
  // page ends them at the range's end, so that a picture taken right after an event shows it (its
  // points may sit up to a step apart from Grafana's).
  const start = TO - Math.floor((TO - FROM) / step) * step;
  const data = await api('/api/v1/query_range', { query: expr, start, end: TO, step });
  return data.result.map(r => ({ metric: r.metric, points: r.values.map(([t, v]) => [t, Number(v)]) }));
}

function legend(format, metric) {
  if (!format) {
    const labels = Object.entries(metric).filter(([k]) => k !== '__name__').map(([k, v]) => `${k}="${v}"`);
    return (metric.__name__ || '') + '{' + labels.join(', ') + '}';
  }
  return format.replace(/\{\{\s*(\w+)\s*\}\}/g, (m, k) => metric[k] || '');
}

function finite(points) {
  return points.some(([, v]) => Number.isFinite(v));
}

// format writes v in a Grafana unit.
function format(v, unit, decimals) {
  if (!Number.isFinite(v)) return 'NaN';
  const fixed = (x, d) => x.toFixed(decimals != null ? decimals : d);
  switch (unit) {
    case 'percentunit': return fixed(v * 100, Math.abs(v) < 0.1 ? 1 : 0) + '%';
    case 'bytes': {
      const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
      let i = 0;
      while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
      return fixed(v, 1) + ' ' + u[i];
    }
    case 's':
      if (Math.abs(v) >= 3600) return fixed(v / 3600, 1) + ' h';
      if (Math.abs(v) >= 60) return fixed(v / 60, 1) + ' min';
      if (Math.abs(v) < 1 && v !== 0) return fixed(v * 1000, 0) + ' ms';
      return fixed(v, 1) + ' s';
    case 'ops': case 'reqps': return fixed(v, Math.abs(v) < 10 ? 2 : 0) + (unit === 'ops' ? ' ops/s' : ' req/s');
    case 'string': return String(v);
    default:
      if (Math.abs(v) >= 1e6) return fixed(v / 1e6, 1) + ' Mil';
      if (Math.abs(v) >= 1e3) return fixed(v / 1e3, 1) + ' K';
      return fixed(v, Number.isInteger(v) ? 0 : 2);
  }
}

window.dashview = { expand, intervals, parseDuration, legend, format, finite, series, PALETTE };

const COLORS = { green: '#73BF69', red: '#F2495C', orange: '#FF9830', yellow: '#FADE2A', blue: '#5794F2' };

// thresholdColor returns the color of the highest threshold step v reaches.
function thresholdColor(v, defaults) {
  let color = 'green';
  for (const s of (defaults.thresholds && defaults.thresholds.steps) || []) {
    if (s.value == null || v >= s.value) color = s.color;
  }
  return COLORS[color] || color;
}

function mapped(v, defaults) {
  for (const m of defaults.mappings || []) {
    if (String(m.value) === String(v)) return m.text;
  }
  return null;
}

// drawStat shows each series' last value, its name when textMode is "name".
function drawStat(body, panel, all) {
  const d = panel.fieldConfig.defaults;
  const box = document.createElement('div');
  box.className = 'stat';
  const shown = all.filter(s => finite(s.points));
  const size = Math.max(14, Math.min(40, body.clientHeight / 2.5, body.clientWidth / (4 * Math.max(shown.length, 1))));
  for (const s of shown) {
    const last = s.points.filter(([, v]) => Number.isFinite(v)).pop()[1];
    const item = document.createElement('div');
    item.style.color = thresholdColor(last, d);
    item.style.fontSize = size + 'px';
    const mode = panel.options.textMode;
    item.textContent = mode === 'name' ? s.name : (mapped(last, d) || format(last, d.unit, d.decimals));
    if (shown.length > 1 && mode !== 'name') {
      const name = document.createElement('small');
      name.textContent = s.name;
      item.appendChild(name);
    }
    box.appendChild(item);
  }
  body.appendChild(box);
}

// drawTable shows an instant query's series as rows: their labels, then the value, with the panel's
// organize transformation applied.
function drawTable(body, panel, all) {
  const org = ((panel.transformations || []).find(t => t.id === 'organize') || { options: {} }).options;
  const excluded = org.excludeByName || {};
  const rename = org.renameByName || {};
  const labels = [];
  for (const s of all) {
    for (const k of Object.keys(s.metric)) if (k !== '__name__' && !labels.includes(k)) labels.push(k);
  }
  const cols = labels.concat(['Value']).filter(c => !excluded[c]);
  const table = document.createElement('table');
  table.innerHTML = '<tr>' + cols.map(c => `<th>${rename[c] || c}</th>`).join('') + '</tr>';
  const unit = panel.fieldConfig.defaults.unit;
  for (const s of all) {
    const tr = document.createElement('tr');
    for (const c of cols) {
      const td = document.createElement('td');
      td.textContent = c === 'Value' ? format(s.points[0][1], unit) : (s.metric[c] || '');
      tr.appendChild(td);
    }
    table.appendChild(tr);
  }
  body.appendChild(table);
}

function canvasIn(body) {
  const c = document.createElement('canvas');
  c.width = body.clientWidth;
  c.height = body.clientHeight;
  body.appendChild(c);
  return c.getContext('2d');
}

// axes draws the y axis of [lo, hi] in unit and the time axis; it returns the plot's mapping.
function axes(g, lo, hi, unit) {
  const w = g.canvas.width, h = g.canvas.height, left = 60, bottom = 16;
  const x = t => left + (t - FROM) / (TO - FROM) * (w - left - 6);
  const y = v => (h - bottom) - (v - lo) / ((hi - lo) || 1) * (h - bottom - 6);
  g.strokeStyle = '#2c3235';
  g.fillStyle = '#8e8e8e';
  g.font = '10px sans-serif';
  for (let i = 0; i <= 4; i++) {
    const v = lo + (hi - lo) * i / 4;
    g.beginPath(); g.moveTo(left, y(v)); g.lineTo(w - 6, y(v)); g.stroke();
    g.fillText(format(v, unit), 2, y(v) + 3);
  }
  for (let i = 0; i <= 4; i++) {
    const t = FROM + (TO - FROM) * i / 4;
    const d = new Date(t * 1000);
    g.fillText(d.toISOString().slice(11, 19), Math.min(x(t) - 20, w - 50), h - 3);
  }
  return { x, y };
}

// stacked adds each series' values to those of the series before it, per time.
function stacked(shown) {
  const base = new Map();
  return shown.map(s => Object.assign({}, s, {
    points: s.points.map(([t, v]) => {
      const below = base.get(t) || 0;
      const top = below + (Number.isFinite(v) ? v : 0);
      base.set(t, top);
      return [t, top, below];
    }),
  }));
}

// override returns the panel's series override for a series name (alias or /regex/).
function override(panel, name) {
  for (const o of panel.seriesOverrides || []) {
    const m = /^\/(.*)\/$/.exec(o.alias);
    if (m ? new RegExp(m[1]).test(name) : o.alias === name) return o;
  }
  return {};
}

// drawGraph draws a graph panel: lines (filled as the panel's fill says) or bars, stacked when the
// panel says so (overrides with stack false stay apart), with the annotations' marks as vertical lines.
function drawGraph(body, panel, all, marks, step) {
  const shown = all.filter(s => finite(s.points));
  const colorOf = s => override(panel, s.name).color || PALETTE[all.findIndex(a => a.name === s.name) % PALETTE.length];
  const leg = document.createElement('div');
  leg.className = 'legend';
  for (const s of shown) leg.insertAdjacentHTML('beforeend', `<span><i style="background:${colorOf(s)}"></i></span>`);
  leg.querySelectorAll('span').forEach((span, i) => span.append(shown[i].name));
  body.appendChild(leg);
  const g = canvasIn(body);
  g.canvas.height = Math.max(body.clientHeight - leg.offsetHeight - 4, 40);
  body.insertBefore(g.canvas, leg);
  const ax = panel.yaxes[0];
  const inStack = s => panel.stack && override(panel, s.name).stack !== false;
  const drawn = stacked(shown.filter(inStack)).concat(shown.filter(s => !inStack(s)).map(s =>
    Object.assign({}, s, { points: s.points.map(([t, v]) => [t, v, 0]) })));
  const values = drawn.flatMap(s => s.points.map(p => p[1])).filter(Number.isFinite);
  const lo = ax.min != null ? Number(ax.min) : Math.min(0, ...values);
  let hi = ax.max != null ? Number(ax.max) : Math.max(...values, lo + 1e-9);
  if (hi <= lo) hi = lo + 1;
  const plot = axes(g, lo, hi, ax.format);
  for (const s of drawn) {
    const o = override(panel, s.name);
    g.strokeStyle = g.fillStyle = colorOf(s);
    g.lineWidth = o.linewidth || panel.linewidth || 1;
    g.setLineDash(o.dashes ? [6, 4] : []);
    if (panel.bars) drawBars(g, plot, s.points, step);
    else drawLine(g, plot, s.points, panel.steppedLine, o.fill != null ? o.fill : panel.fill);
  }
  g.setLineDash([3, 3]);
  g.lineWidth = 1;
  for (const m of marks) {
    g.strokeStyle = m.color;
    g.beginPath(); g.moveTo(plot.x(m.time), 0); g.lineTo(plot.x(m.time), g.canvas.height - 16); g.stroke();
  }
}

function drawBars(g, { x, y }, points, step) {
  const bw = Math.max(2, (x(FROM + step) - x(FROM)) * 0.8);
  for (const [t, top, below] of points) {
    if (Number.isFinite(top) && top !== below) g.fillRect(x(t) - bw, y(top), bw, y(below) - y(top));
  }
}

// drawLine draws the runs of finite points of a series [t, top, below], each filled down to below with
// an opacity of fill tenths.
function drawLine(g, { x, y }, points, stepped, fill) {
  const runs = [[]];
  for (const p of points) {
    if (Number.isFinite(p[1])) runs[runs.length - 1].push(p);
    else if (runs[runs.length - 1].length) runs.push([]);
  }
  for (const run of runs.filter(r => r.length)) {
    const path = [];
    run.forEach(([t, top], i) => {
      if (stepped && i > 0) path.push([x(t), y(run[i - 1][1])]);
      path.push([x(t), y(top)]);
    });
    g.beginPath();
    path.forEach(([px, py], i) => (i ? g.lineTo(px, py) : g.moveTo(px, py)));
    g.stroke();
    if (!fill) continue;
    g.globalAlpha = fill / 10 * 0.7;
    for (let i = run.length - 1; i >= 0; i--) {
      g.lineTo(x(run[i][0]), y(run[i][2]));
      if (stepped && i > 0) g.lineTo(x(run[i][0]), y(run[i - 1][2]));
    }
    g.closePath();
    g.fill();
    g.globalAlpha = 1;
  }
}

// drawHeatmap counts the series' values per time step in the panel's y buckets, as Grafana's heatmap
// of time series does, and shades each cell by its count.
function drawHeatmap(body, panel, all, step) {
  const g = canvasIn(body);
  const size = panel.yBucketSize || 0.1;
  const lo = Number(panel.yAxis.min || 0), hi = Number(panel.yAxis.max || 1);
  const { x, y } = axes(g, lo, hi, panel.yAxis.format);
  const cells = new Map();
  let most = 1;
  for (const s of all) {
    for (const [t, v] of s.points) {
      if (!Number.isFinite(v)) continue;
      const b = Math.max(0, Math.min(Math.floor((v - lo) / size + 1e-9), Math.round((hi - lo) / size) - 1));
      const key = t + ':' + b;
      cells.set(key, (cells.get(key) || 0) + 1);
      most = Math.max(most, cells.get(key));
    }
  }
  for (const [key, n] of cells) {
    const [t, b] = key.split(':').map(Number);
    g.fillStyle = `rgba(255, 152, 48, ${0.25 + 0.75 * Math.sqrt(n / most)})`;
    const top = y(lo + (b + 1) * size), bottom = y(lo + b * size);
    g.fillRect(x(t - step), top, Math.max(x(t) - x(t - step) - 1, 1), Math.max(bottom - top - 1, 1));
  }
}

// flatten returns the dashboard's panels with the panels of collapsed rows after their row.
function flatten(panels) {
  return panels.flatMap(p => [p].concat(flatten(p.panels || [])));
}

// box places a panel's element at its gridPos.
function box(grid, panel) {
  const col = (WIDTH - 16) / 24, gp = panel.gridPos;
  const el = document.createElement('div');
  el.className = 'panel' + (panel.type === 'row' ? ' row' : '');
  el.style.left = gp.x * col + 'px';
  el.style.top = gp.y * (CELL + MARGIN) + 'px';
  el.style.width = gp.w * col - MARGIN + 'px';
  el.style.height = gp.h * (CELL + MARGIN) - MARGIN + 'px';
  el.innerHTML = '<h2></h2><div class="body"></div>';
  el.querySelector('h2').textContent = expand(panel.title);
  grid.appendChild(el);
  return el;
}

// annotationMarks runs each annotation's query over the range at its step, with $__interval the step
// (as Grafana 7.5 does), and returns its marks (one per series and time the query returned) and a
// report entry per annotation.
async function annotationMarks(dashboard) {
  const marks = [], reports = [];
  for (const a of (dashboard.annotations && dashboard.annotations.list) || []) {
    if (!a.expr) continue;
    const step = parseDuration(a.step) || 60;
    const entry = { kind: 'annotation', title: a.name, marks: 0 };
    try {
      const iv = Object.assign(intervals(1, '').vars, { __interval: step + 's', __interval_ms: String(step * 1000) });
      const all = await series(expand(a.expr, iv), step, false);
      for (const s of all) {
        for (const [t, v] of s.points) {
          if (Number.isFinite(v)) marks.push({ time: t, color: a.iconColor, title: legend(a.titleFormat, s.metric) });
        }
      }
      entry.marks = all.reduce((n, s) => n + s.points.length, 0);
      entry.state = entry.marks > 0 ? 'data' : 'empty';
    } catch (e) {
      entry.state = 'error';
      entry.error = String(e.message || e);
    }
    reports.push(entry);
  }
  return { marks, reports };
}

// drawPanel queries a panel's targets, draws it and returns its report entry.
async function drawPanel(el, panel, marks) {
  const entry = { kind: 'panel', id: panel.id, title: expand(panel.title), type: panel.type, series: 0 };
  const body = el.querySelector('.body');
  const { step, vars: iv } = intervals(body.clientWidth, panel.interval);
  const all = [];
  try {
    for (const t of panel.targets || []) {
      const got = await series(expand(t.expr, iv), step, t.instant || panel.type === 'table');
      for (const s of got) all.push(Object.assign(s, { name: legend(t.legendFormat, s.metric) }));
    }
  } catch (e) {
    entry.state = 'error';
    entry.error = String(e.message || e);
    el.classList.add('error');
    el.insertAdjacentHTML('beforeend', '<div class="msg"></div>');
    el.querySelector('.msg').textContent = entry.error;
    return entry;
  }
  entry.series = all.filter(s => finite(s.points)).length;
  entry.state = entry.series > 0 ? 'data' : 'empty';
  if (entry.state === 'empty') {
    el.classList.add('empty');
    el.insertAdjacentHTML('beforeend', '<div class="state empty">No data</div>');
    return entry;
  }
  const draw = { stat: drawStat, table: drawTable, graph: drawGraph, heatmap: drawHeatmap }[panel.type];
  if (panel.type === 'graph') draw(body, panel, all, marks, step);
  else draw(body, panel, all, step);
  return entry;
}

async function main() {
  const file = params.get('dashboard');
  const dashboard = await (await fetch('/dashboards/' + encodeURIComponent(file))).json();
  const grid = document.getElementById('grid');
  const title = document.getElementById('title');
  title.textContent = dashboard.title;
  const vs = Object.entries(vars).map(([k, v]) => `${k}=${v}`).join('  ');
  title.insertAdjacentHTML('beforeend', `<small></small>`);
  title.querySelector('small').textContent = `${vs}  ${new Date(FROM * 1000).toISOString()} to ${new Date(TO * 1000).toISOString()}`;
  const panels = flatten(dashboard.panels);
  grid.style.height = Math.max(...panels.map(p => (p.gridPos.y + p.gridPos.h) * (CELL + MARGIN))) + 'px';
  grid.style.width = WIDTH - 16 + 'px';
  const { marks, reports } = await annotationMarks(dashboard);
  const entries = [];
  for (const p of panels) {
    const el = box(grid, p);
    if (p.type !== 'row') entries.push(drawPanel(el, p, marks));
  }
  return (await Promise.all(entries)).concat(reports);
}

main().then(report => {
  window.dashviewReport = report;
}).catch(e => {
  window.dashviewReport = [{ kind: 'page', title: 'page', state: 'error', error: String(e.stack || e) }];
}).finally(() => {
  window.dashviewDone = true;
});
