package benchmarks

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteChartBars(t *testing.T) {
	tests := []struct {
		name   string
		points []ChartPoint
		tops   [2]float64 // axis top of the probes and the CPU panel
	}{
		{
			name: "two shoot counts and two replica counts given out of order",
			points: []ChartPoint{
				{Shoots: 5000, Replicas: 3, ProbesPerSecondPerReplica: 300, CPUCoresPerReplica: 0.2},
				{Shoots: 1000, Replicas: 3, ProbesPerSecondPerReplica: 100, CPUCoresPerReplica: 0.05},
				{Shoots: 5000, Replicas: 1, ProbesPerSecondPerReplica: 200, CPUCoresPerReplica: 0.4},
				{Shoots: 1000, Replicas: 1, ProbesPerSecondPerReplica: 400, CPUCoresPerReplica: 0.1},
			},
			tops: [2]float64{400, 0.4},
		},
		{
			name:   "single shoot count and replica count",
			points: []ChartPoint{{Shoots: 1000, Replicas: 1, ProbesPerSecondPerReplica: 312.4, CPUCoresPerReplica: 0.085}},
			tops:   [2]float64{400, 0.1},
		},
		{
			name: "missing run leaves a gap",
			points: []ChartPoint{
				{Shoots: 1000, Replicas: 1, ProbesPerSecondPerReplica: 50, CPUCoresPerReplica: 1},
				{Shoots: 5000, Replicas: 3, ProbesPerSecondPerReplica: 20, CPUCoresPerReplica: 2},
			},
			tops: [2]float64{50, 2},
		},
		{
			name: "all zero",
			points: []ChartPoint{
				{Shoots: 1000, Replicas: 1}, {Shoots: 5000, Replicas: 1}, {Shoots: 1000, Replicas: 3},
			},
			tops: [2]float64{1, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := render(t, tt.points)
			require.Equal(t, image.Rect(0, 0, 900, 420), img.Bounds())
			shoots, replicas := distinct(tt.points)
			for panel, m := range metrics {
				for s := range shoots {
					var want []float64
					for _, r := range replicas {
						for _, p := range tt.points {
							if p.Shoots == shoots[s] && p.Replicas == r && m.value(p) > 0 {
								want = append(want, m.value(p)/tt.tops[panel]*(plotBottom-plotTop))
							}
						}
					}
					got := barHeights(img, panel, seriesColour(s))
					require.Len(t, got, len(want), "%s, %d shoots", m.label, shoots[s])
					for i := range want {
						assert.InDelta(t, want[i], got[i], 1, "%s, %d shoots, bar %d", m.label, shoots[s], i)
					}
				}
			}
		})
	}
}

func TestWriteChartExtremeValues(t *testing.T) {
	points := []ChartPoint{
		{Shoots: math.MaxInt, Replicas: 1, ProbesPerSecondPerReplica: math.MaxFloat64, CPUCoresPerReplica: 5e-324},
		{Shoots: 1, Replicas: math.MaxInt, ProbesPerSecondPerReplica: 1e-300, CPUCoresPerReplica: 1e300},
	}
	img := render(t, points)
	assert.Equal(t, image.Rect(0, 0, 900, 420), img.Bounds())
}

func TestWriteChartErrors(t *testing.T) {
	valid := ChartPoint{Shoots: 1000, Replicas: 1, ProbesPerSecondPerReplica: 300, CPUCoresPerReplica: 0.1}
	with := func(change func(*ChartPoint)) []ChartPoint {
		p := valid
		change(&p)
		return []ChartPoint{valid, {Shoots: 5000, Replicas: 1}, p}
	}
	tests := []struct {
		name    string
		points  []ChartPoint
		wantErr string
	}{
		{"nil points", nil, "no points to chart"},
		{"empty points", []ChartPoint{}, "no points to chart"},
		{
			"NaN CPU", with(func(p *ChartPoint) { p.Shoots, p.Replicas, p.CPUCoresPerReplica = 5000, 3, math.NaN() }),
			"point 2 (5000 shoots, 3 replicas): CPU cores per replica is NaN",
		},
		{
			"infinite probes", with(func(p *ChartPoint) { p.Replicas, p.ProbesPerSecondPerReplica = 2, math.Inf(1) }),
			"point 2 (1000 shoots, 2 replicas): probes/s per replica is +Inf",
		},
		{
			"negative CPU", with(func(p *ChartPoint) { p.Replicas, p.CPUCoresPerReplica = 2, -0.5 }),
			"point 2 (1000 shoots, 2 replicas): CPU cores per replica is negative (-0.5)",
		},
		{
			"zero shoots", with(func(p *ChartPoint) { p.Shoots = 0 }),
			"point 2 (0 shoots, 1 replicas): shoots must be positive",
		},
		{
			"negative replicas", with(func(p *ChartPoint) { p.Replicas = -1 }),
			"point 2 (1000 shoots, -1 replicas): replicas must be positive",
		},
		{
			"duplicate run", with(func(*ChartPoint) {}),
			"point 2 (1000 shoots, 1 replicas): same shoots and replicas as point 0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			assert.EqualError(t, WriteChart(&buf, "title", tt.points), tt.wantErr)
			assert.Zero(t, buf.Len(), "nothing is written on error")
		})
	}
}

func TestWriteChartDeterministic(t *testing.T) {
	points := []ChartPoint{
		{Shoots: 1000, Replicas: 1, ProbesPerSecondPerReplica: 312.4, CPUCoresPerReplica: 0.085},
		{Shoots: 5000, Replicas: 1, ProbesPerSecondPerReplica: 1450.2, CPUCoresPerReplica: 0.41},
		{Shoots: 1000, Replicas: 3, ProbesPerSecondPerReplica: 104.1, CPUCoresPerReplica: 0.031},
		{Shoots: 5000, Replicas: 3, ProbesPerSecondPerReplica: 498.7, CPUCoresPerReplica: 0.152},
	}
	first := encode(t, "dwd load", points)
	assert.Equal(t, first, encode(t, "dwd load", points), "same input")
	reversed := slices.Clone(points)
	slices.Reverse(reversed)
	assert.Equal(t, first, encode(t, "dwd load", reversed), "same points in another order")
	assert.NotEqual(t, first, encode(t, "other title", points), "the title is drawn")
}

func TestWriteChartWriteError(t *testing.T) {
	err := WriteChart(failingWriter{}, "title", []ChartPoint{{Shoots: 1, Replicas: 1}})
	assert.ErrorIs(t, err, errWrite)
}

func TestNewAxis(t *testing.T) {
	tests := []struct {
		maxValue float64
		want     axis
	}{
		{0, axis{step: 0.2, ticks: 5, decimals: 1}},
		{1, axis{step: 0.2, ticks: 5, decimals: 1}},
		{3, axis{step: 1, ticks: 3, decimals: 0}},
		{12, axis{step: 2.5, ticks: 5, decimals: 1}},
		{312.4, axis{step: 100, ticks: 4, decimals: 0}},
		{1450.2, axis{step: 500, ticks: 3, decimals: 0}},
		{2400, axis{step: 500, ticks: 5, decimals: 0}},
		{0.085, axis{step: 0.02, ticks: 5, decimals: 2}},
		{0.11, axis{step: 0.025, ticks: 5, decimals: 3}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.maxValue), func(t *testing.T) {
			got := newAxis(tt.maxValue)
			assert.InDelta(t, tt.want.step, got.step, tt.want.step*1e-9)
			assert.Equal(t, tt.want.ticks, got.ticks)
			assert.Equal(t, tt.want.decimals, got.decimals)
			assert.GreaterOrEqual(t, got.top(), tt.maxValue)
		})
	}
}

func TestFormatValue(t *testing.T) {
	tests := map[float64]string{
		0: "0", 0.0042: "0.0042", 0.085: "0.085", 1.5: "1.50", 42.26: "42.3", 312.44: "312.4", 1450.6: "1451",
	}
	for v, want := range tests {
		assert.Equal(t, want, formatValue(v), "formatValue(%v)", v)
	}
}

var errWrite = errors.New("disk full")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errWrite }

func encode(t *testing.T, title string, points []ChartPoint) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteChart(&buf, title, points))
	return buf.Bytes()
}

func render(t *testing.T, points []ChartPoint) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(encode(t, "title", points)))
	require.NoError(t, err)
	return img
}

func distinct(points []ChartPoint) (shoots, replicas []int) {
	for _, p := range points {
		shoots = append(shoots, p.Shoots)
		replicas = append(replicas, p.Replicas)
	}
	slices.Sort(shoots)
	slices.Sort(replicas)
	return slices.Compact(shoots), slices.Compact(replicas)
}

// barHeights finds the bars of colour c in a panel, left to right, as runs of columns holding that colour
// inside the plot area, and returns the number of such pixels in each run's first column.
func barHeights(img image.Image, panel int, c color.RGBA) []int {
	var heights []int
	inBar := false
	for x := panel * panelWidth; x < (panel+1)*panelWidth; x++ {
		n := 0
		for y := plotTop; y <= plotBottom; y++ {
			if color.RGBAModel.Convert(img.At(x, y)) == c {
				n++
			}
		}
		if n > 0 && !inBar {
			heights = append(heights, n)
		}
		inBar = n > 0
	}
	return heights
}
