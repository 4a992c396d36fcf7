package benchmarks

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"slices"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Chart geometry in pixels. Each of the two panels is half the chart wide; the plot area of a panel
// leaves room on its left for the vertical axis label and the tick labels.
const (
	chartWidth, chartHeight = 900, 420
	panelWidth              = chartWidth / 2
	plotTop, plotBottom     = 80, chartHeight - 50
	plotLeftPad             = 80
	plotRightPad            = 20
	// barFill is the share of a replica group's width that its bars take; the rest separates groups.
	barFill = 0.7
)

var (
	face       = basicfont.Face7x13
	ink        = color.RGBA{0x20, 0x20, 0x20, 0xff} // text and axes
	gridColour = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	// seriesColours are assigned to the shoot counts in ascending order and repeat after the last one.
	seriesColours = []color.RGBA{
		{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
		{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
	}
)

// ChartPoint is one steady-state run as the chart shows it.
type ChartPoint struct {
	Shoots, Replicas          int
	ProbesPerSecondPerReplica float64 // mean over the run's replicas
	CPUCoresPerReplica        float64 // mean CPU cores (cpu seconds per second) per replica
}

// metric is one panel of the chart: the value it plots and the label of its y axis.
type metric struct {
	label string
	value func(ChartPoint) float64
}

var metrics = []metric{
	{"probes/s per replica", func(p ChartPoint) float64 { return p.ProbesPerSecondPerReplica }},
	{"CPU cores per replica", func(p ChartPoint) float64 { return p.CPUCoresPerReplica }},
}

// WriteChart draws two panels side by side as a PNG to w: probes/s per replica, and CPU cores per replica,
// each against the replica count (x axis: the distinct replica counts in points, ascending), one series
// per shoot count (distinct colours, legend "1000 shoots" etc.). title is drawn at the top.
//
// Bars are grouped by replica count, one bar per shoot count, each labelled with its value. A shoot
// count and replica count pair without a point leaves a gap. Points must be valid and unique per pair;
// their order does not change the output.
func WriteChart(w io.Writer, title string, points []ChartPoint) error {
	if err := validatePoints(points); err != nil {
		return err
	}
	c := newChart(points)
	img := image.NewRGBA(image.Rect(0, 0, chartWidth, chartHeight))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	drawText(img, title, chartWidth/2, 22)
	c.drawLegend(img, 46)
	for i, m := range metrics {
		c.drawPanel(img, i*panelWidth, m)
	}
	return png.Encode(w, img)
}

type seriesKey struct{ shoots, replicas int }

func validatePoints(points []ChartPoint) error {
	if len(points) == 0 {
		return errors.New("no points to chart")
	}
	seen := make(map[seriesKey]int, len(points))
	for i, p := range points {
		err := validatePoint(p)
		if j, dup := seen[seriesKey{p.Shoots, p.Replicas}]; err == nil && dup {
			err = fmt.Errorf("same shoots and replicas as point %d", j)
		}
		if err != nil {
			return fmt.Errorf("point %d (%d shoots, %d replicas): %w", i, p.Shoots, p.Replicas, err)
		}
		seen[seriesKey{p.Shoots, p.Replicas}] = i
	}
	return nil
}

func validatePoint(p ChartPoint) error {
	if p.Shoots <= 0 {
		return errors.New("shoots must be positive")
	}
	if p.Replicas <= 0 {
		return errors.New("replicas must be positive")
	}
	for _, m := range metrics {
		switch v := m.value(p); {
		case math.IsNaN(v), math.IsInf(v, 0):
			return fmt.Errorf("%s is %v", m.label, v)
		case v < 0:
			return fmt.Errorf("%s is negative (%v)", m.label, v)
		}
	}
	return nil
}

// chart holds validated points indexed for drawing.
type chart struct {
	shoots, replicas []int // distinct, ascending
	points           map[seriesKey]ChartPoint
}

func newChart(points []ChartPoint) *chart {
	c := &chart{points: make(map[seriesKey]ChartPoint, len(points))}
	for _, p := range points {
		c.shoots = append(c.shoots, p.Shoots)
		c.replicas = append(c.replicas, p.Replicas)
		c.points[seriesKey{p.Shoots, p.Replicas}] = p
	}
	slices.Sort(c.shoots)
	slices.Sort(c.replicas)
	c.shoots = slices.Compact(c.shoots)
	c.replicas = slices.Compact(c.replicas)
	return c
}

func (c *chart) drawLegend(img *image.RGBA, baseline int) {
	const swatch, gap, spacing = 12, 4, 24
	labels := make([]string, len(c.shoots))
	total := -spacing
	for i, s := range c.shoots {
		labels[i] = strconv.Itoa(s) + " shoots"
		total += swatch + gap + textWidth(labels[i]) + spacing
	}
	x := (chartWidth - total) / 2
	for i, label := range labels {
		fill(img, image.Rect(x, baseline-swatch+1, x+swatch, baseline+1), seriesColour(i))
		x += swatch + gap
		drawTextAt(img, label, x, baseline)
		x += textWidth(label) + spacing
	}
}

func (c *chart) drawPanel(img *image.RGBA, x0 int, m metric) {
	plot := image.Rect(x0+plotLeftPad, plotTop, x0+panelWidth-plotRightPad, plotBottom)
	maxValue := 0.0
	for _, p := range c.points {
		maxValue = max(maxValue, m.value(p))
	}
	a := newAxis(maxValue)
	for i := 0; i <= a.ticks; i++ {
		y := plot.Max.Y - scale(float64(i)/float64(a.ticks), plot.Dy())
		fill(img, image.Rect(plot.Min.X, y, plot.Max.X, y+1), gridColour)
		label := strconv.FormatFloat(float64(i)*a.step, 'f', a.decimals, 64)
		drawTextAt(img, label, plot.Min.X-6-textWidth(label), y+4)
	}
	c.drawBars(img, plot, a, m)
	fill(img, image.Rect(plot.Min.X, plot.Min.Y, plot.Min.X+1, plot.Max.Y+1), ink)
	fill(img, image.Rect(plot.Min.X, plot.Max.Y, plot.Max.X, plot.Max.Y+1), ink)
	drawTextVertical(img, m.label, x0+14, (plot.Min.Y+plot.Max.Y)/2)
	drawText(img, "replicas", (plot.Min.X+plot.Max.X)/2, chartHeight-10)
}

func (c *chart) drawBars(img *image.RGBA, plot image.Rectangle, a axis, m metric) {
	groupWidth := plot.Dx() / len(c.replicas)
	barWidth := max(1, int(float64(groupWidth)*barFill)/len(c.shoots))
	for g, replicas := range c.replicas {
		groupX := plot.Min.X + g*groupWidth
		drawText(img, strconv.Itoa(replicas), groupX+groupWidth/2, plot.Max.Y+16)
		x := groupX + (groupWidth-barWidth*len(c.shoots))/2
		for s, shoots := range c.shoots {
			if p, ok := c.points[seriesKey{shoots, replicas}]; ok {
				v := m.value(p)
				top := plot.Max.Y - scale(v/a.top(), plot.Dy())
				fill(img, image.Rect(x, top, x+barWidth, plot.Max.Y), seriesColour(s))
				drawText(img, formatValue(v), x+barWidth/2, top-4)
			}
			x += barWidth
		}
	}
}

// axis is a y axis from 0 to ticks×step, where step is a nice number (1, 2, 2.5 or 5 × 10^k).
type axis struct {
	step     float64
	ticks    int
	decimals int // enough to print every multiple of step exactly
}

func (a axis) top() float64 { return a.step * float64(a.ticks) }

// newAxis picks the smallest nice step that covers maxValue in at most five steps, giving three to
// five gridlines above zero. An all-zero chart gets the axis of maxValue 1.
func newAxis(maxValue float64) axis {
	const maxTicks = 5
	// A tiny slack keeps float noise (1/0.2 = 5.000…1) from adding an empty step.
	const slack = 1e-9
	if maxValue == 0 {
		maxValue = 1
	}
	// Start a decade low enough that the first steps tried are too small, then grow.
	k := int(math.Floor(math.Log10(maxValue))) - 1
	for {
		for _, f := range []float64{1, 2, 2.5, 5} {
			step := f * math.Pow10(k)
			if ticks := math.Ceil(maxValue/step - slack); ticks <= maxTicks {
				decimals := max(0, -k)
				if f == 2.5 {
					decimals = max(0, 1-k)
				}
				return axis{step: step, ticks: int(max(1, ticks)), decimals: decimals}
			}
		}
		k++
	}
}

// formatValue prints a bar's value with about three significant digits.
func formatValue(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v >= 0.01:
		return strconv.FormatFloat(v, 'f', 3, 64)
	default:
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
}

// scale maps a share in [0, 1] to pixels of length; shares outside it (rounding, overflow) are clamped.
func scale(share float64, length int) int {
	if !(share > 0) {
		return 0
	}
	return int(math.Round(min(share, 1) * float64(length)))
}

func seriesColour(i int) color.RGBA { return seriesColours[i%len(seriesColours)] }

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	draw.Draw(img, r, image.NewUniform(c), image.Point{}, draw.Src)
}

func textWidth(s string) int { return font.MeasureString(face, s).Ceil() }

// drawText draws s centred on x with its baseline at y.
func drawText(img *image.RGBA, s string, x, baseline int) {
	drawTextAt(img, s, x-textWidth(s)/2, baseline)
}

func drawTextAt(img *image.RGBA, s string, x, baseline int) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(ink), Face: face, Dot: fixed.P(x, baseline)}
	d.DrawString(s)
}

// drawTextVertical draws s reading upwards, its left edge at x and its centre at centreY.
func drawTextVertical(img *image.RGBA, s string, x, centreY int) {
	w, h := textWidth(s), face.Height
	mask := image.NewAlpha(image.Rect(0, 0, w, h))
	d := font.Drawer{Dst: mask, Src: image.Opaque, Face: face, Dot: fixed.P(0, face.Ascent)}
	d.DrawString(s)
	rotated := image.NewAlpha(image.Rect(0, 0, h, w))
	for y := range h {
		for x := range w {
			rotated.SetAlpha(y, w-1-x, mask.AlphaAt(x, y))
		}
	}
	r := image.Rect(x, centreY-w/2, x+h, centreY-w/2+w)
	draw.DrawMask(img, r, image.NewUniform(ink), image.Point{}, rotated, image.Point{}, draw.Over)
}
