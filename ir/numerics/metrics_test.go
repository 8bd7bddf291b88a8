package numerics

import (
	"math"
	"testing"
)

func TestPCC(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	tests := []struct {
		name      string
		want, got []float32
		pcc       float64
	}{
		{"identical", []float32{1, -2, 3.5, 0}, []float32{1, -2, 3.5, 0}, 1},
		{"negated", []float32{1, -2, 3.5, 0}, []float32{-1, 2, -3.5, 0}, -1},
		{"scaled and shifted", []float32{1, 2, 3}, []float32{12, 14, 16}, 1},
		// means 2 and 7/3; cov = 3, var sums 2 and 14/3: 3/sqrt(28/3).
		{"hand computed", []float32{1, 2, 3}, []float32{1, 2, 4}, 3 / math.Sqrt(28.0/3)},
		{"empty", nil, nil, 1},
		{"equal constants", []float32{2, 2, 2}, []float32{2, 2, 2}, 1},
		{"different constants", []float32{2, 2, 2}, []float32{3, 3, 3}, 0},
		{"constant want", []float32{2, 2, 2}, []float32{1, 2, 3}, 0},
		{"constant got", []float32{1, 2, 3}, []float32{0, 0, 0}, 0},
		{"NaN in got", []float32{1, 2, 3}, []float32{1, nan, 3}, 0},
		{"Inf in want", []float32{1, inf, 3}, []float32{1, 2, 3}, 0},
		{"same NaN positions", []float32{1, nan, 3}, []float32{1, nan, 3}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PCC(tt.want, tt.got)
			if math.Abs(got-tt.pcc) > 1e-12 || math.IsNaN(got) {
				t.Errorf("PCC = %.15g, want %.15g", got, tt.pcc)
			}
		})
	}
}

func TestMaxRelErr(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	tests := []struct {
		name      string
		want, got []float32
		err       float64
	}{
		{"equal", []float32{1, -2, 0}, []float32{1, -2, 0}, 0},
		// floor = 1e-3 * 100 = 0.1: errors 1/100 and 0.05/0.1.
		{"floor applies near zero", []float32{100, 0, -50}, []float32{101, 0.05, -50}, 0.5},
		{"relative to own magnitude", []float32{100, 10}, []float32{100, 11}, 0.1},
		{"all-zero reference is absolute", []float32{0, 0}, []float32{0, 0.25}, 0.25},
		{"empty", nil, nil, 0},
		{"NaN mismatch", []float32{1, 2}, []float32{1, nan}, math.Inf(1)},
		{"matching NaN and Inf", []float32{nan, inf, 4}, []float32{nan, inf, 4}, 0},
		{"Inf mismatch", []float32{1, inf}, []float32{1, 5}, math.Inf(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MaxRelErr(tt.want, tt.got)
			if math.Abs(got-tt.err) > 1e-6 && !(math.IsInf(got, 1) && math.IsInf(tt.err, 1)) {
				t.Errorf("MaxRelErr = %.10g, want %.10g", got, tt.err)
			}
		})
	}
}

func TestMetricsPanicOnLengthMismatch(t *testing.T) {
	for name, fn := range map[string]func(){
		"PCC":       func() { PCC([]float32{1}, []float32{1, 2}) },
		"MaxRelErr": func() { MaxRelErr([]float32{1}, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s accepted vectors of different lengths", name)
				}
			}()
			fn()
		})
	}
}
