package ir

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func gdnSplit(t TensorType, axis int) TensorType { t.Dist = Dist{Axis: axis}; return t }

func TestShapeGDNConvGates(t *testing.T) {
	// 27B at TP=2: C = 5120, H = 24, K = 4.
	in := []TensorType{
		gdnSplit(T(BF16, 1, 3, 5120), 2), gdnSplit(T(BF16, 1, 1, 5120), 2), gdnSplit(T(BF16, 4, 5120), 1),
		gdnSplit(T(BF16, 1, 1, 24), 2), gdnSplit(T(BF16, 1, 1, 24), 2), gdnSplit(T(BF16, 24), 0), gdnSplit(T(BF16, 24), 0),
	}
	got, err := shapeGDNConvGates(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []TensorType{gdnSplit(T(BF16, 1, 1, 5120), 2), gdnSplit(T(BF16, 1, 3, 5120), 2), gdnSplit(T(BF16, 24, 1), 0), gdnSplit(T(BF16, 24, 1), 0)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("types (-want +got):\n%s", diff)
	}
	bad := []struct {
		name string
		i    int
		t    TensorType
		rule string
	}{
		{"qkv rows", 1, T(BF16, 1, 2, 5120), "gdn-conv-qkv"},
		{"state channels", 0, T(BF16, 1, 3, 5000), "gdn-conv-state"},
		{"taps", 2, T(BF16, 3, 5120), "gdn-conv-taps"},
		{"state dtype", 0, T(FP32, 1, 3, 5120), "gdn-conv-state-dtype"},
		{"b heads", 4, T(BF16, 1, 1, 12), "gdn-gates"},
		{"a_log", 5, T(BF16, 12), "gdn-gates-vectors"},
		{"int", 3, T(UInt32, 1, 1, 24), "gdn-conv-dtype"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			args := append([]TensorType(nil), in...)
			args[c.i] = c.t
			if _, err := shapeGDNConvGates(args, nil); err == nil || !strings.Contains(err.Error(), "rule "+c.rule) {
				t.Errorf("error %v, want rule %s", err, c.rule)
			}
		})
	}
}

func TestShapeGDNRecurrence(t *testing.T) {
	// 27B at TP=2: Hk = 8, H = 24, Dk = Dv = 128, C = 2*1024 + 3072.
	in := []TensorType{
		gdnSplit(T(BF16, 1, 1, 5120), 2), gdnSplit(T(BF16, 24, 1), 0), gdnSplit(T(BF16, 24, 1), 0),
		gdnSplit(T(FP32, 1, 24, 128, 128), 1), gdnSplit(T(BF16, 1, 1, 3072), 2), T(BF16, 128),
	}
	got, err := shapeGDNRecurrence(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []TensorType{gdnSplit(T(BF16, 1, 1, 3072), 2), gdnSplit(T(FP32, 1, 24, 128, 128), 1)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("types (-want +got):\n%s", diff)
	}
	bad := []struct {
		name string
		i    int
		t    TensorType
		rule string
	}{
		{"state rank", 3, T(FP32, 24, 128, 128), "gdn-recurrence-state"},
		{"qkv batch", 0, T(BF16, 2, 1, 5120), "gdn-recurrence-qkv"},
		{"key heads", 0, T(BF16, 1, 1, 5120-256), "gdn-recurrence-heads"}, // Hk = 7 does not divide 24
		{"no key block", 0, T(BF16, 1, 1, 3072), "gdn-recurrence-heads"},  // C = H*Dv
		{"beta", 1, T(BF16, 1, 24), "gdn-recurrence-gates"},               // not a column
		{"z", 4, T(BF16, 1, 1, 3000), "gdn-recurrence-z"},                 // not H*Dv
		{"norm", 5, T(BF16, 64), "gdn-recurrence-norm"},                   // not Dv
		{"int", 2, T(Int32, 24, 1), "gdn-recurrence-dtype"},               // not float
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			args := append([]TensorType(nil), in...)
			args[c.i] = c.t
			if _, err := shapeGDNRecurrence(args, nil); err == nil || !strings.Contains(err.Error(), "rule "+c.rule) {
				t.Errorf("error %v, want rule %s", err, c.rule)
			}
		})
	}
}

func TestShapeGDNChunkStep(t *testing.T) {
	// 27B at TP=2, 256 tokens: H = 24, N = 8, L = 32, Dk = Dv = 128.
	f := func(s ...int) TensorType { return gdnSplit(T(FP32, s...), 1) }
	in := []TensorType{
		f(1, 24, 8, 32, 128), f(1, 24, 8, 32, 128), f(1, 24, 8, 32, 128), f(1, 24, 8, 32, 32),
		f(1, 24, 8, 32, 128), f(1, 24, 8, 32), f(1, 24, 1, 128, 128),
	}
	attrs := Attrs{"chunk": 3}
	got, err := shapeGDNChunkStep(in, attrs)
	if err != nil {
		t.Fatal(err)
	}
	want := []TensorType{f(1, 24, 1, 32, 128), f(1, 24, 1, 128, 128)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("types (-want +got):\n%s", diff)
	}
	bad := []struct {
		name  string
		i     int
		t     TensorType
		chunk any
		rule  string
	}{
		{"int", 5, T(Int32, 1, 24, 8, 32), 3, "gdn-chunk-dtype"},
		{"bf16 u", 0, T(BF16, 1, 24, 8, 32, 128), 3, "gdn-chunk-dtype"},
		{"state rank", 6, T(FP32, 1, 24, 128, 128), 3, "gdn-chunk-state"},
		{"state chunks", 6, T(FP32, 1, 24, 2, 128, 128), 3, "gdn-chunk-state"},
		{"g heads", 5, T(FP32, 1, 12, 8, 32), 3, "gdn-chunk-g"},
		{"u dim", 0, T(FP32, 1, 24, 8, 32, 64), 3, "gdn-chunk-operand"},
		{"qk square", 3, T(FP32, 1, 24, 8, 32, 128), 3, "gdn-chunk-operand"},
		{"k chunks", 4, T(FP32, 1, 24, 7, 32, 128), 3, "gdn-chunk-operand"},
		{"chunk past end", 0, in[0], 8, "gdn-chunk-index"},
		{"negative chunk", 0, in[0], -1, "gdn-chunk-index"},
		{"chunk not int", 0, in[0], 1.0, "gdn-chunk-index"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			args := append([]TensorType(nil), in...)
			args[c.i] = c.t
			if _, err := shapeGDNChunkStep(args, Attrs{"chunk": c.chunk}); err == nil || !strings.Contains(err.Error(), "rule "+c.rule) {
				t.Errorf("error %v, want rule %s", err, c.rule)
			}
		})
	}
}

// TestShapeGDNChunkPrepAttrs: gdn_chunk_prep's exp_g and decay attributes.
// With decay operand gamma is g's row form [B, H, N, 1, L] and the results
// are as with Γ; bad values, decay without exp_g and a wrong row shape are
// errors naming the rule.
func TestShapeGDNChunkPrepAttrs(t *testing.T) {
	in := func(gamma ...int) []TensorType {
		return []TensorType{T(FP32, 1, 2, 3, 32, 64), T(FP32, 1, 2, 3, 32, 64), T(FP32, 1, 2, 3, 32, 32), T(FP32, 1, 2, 3, 32, 1),
			T(FP32, 1, 2, 3, 32, 1), T(FP32, gamma...), T(FP32, 1, 2, 3, 32, 64)}
	}
	want, err := shapeGDNChunkPrep(in(1, 2, 3, 32, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		gamma []int
		attrs Attrs
		rule  string // "" for want's types
	}{
		{"exp_g", []int{1, 2, 3, 32, 32}, Attrs{"exp_g": 1}, ""},
		{"decay", []int{1, 2, 3, 1, 32}, Attrs{"exp_g": 1, "decay": 1}, ""},
		{"exp_g 2", []int{1, 2, 3, 32, 32}, Attrs{"exp_g": 2}, "gdn-chunk-prep-exp-g"},
		{"decay without exp_g", []int{1, 2, 3, 1, 32}, Attrs{"decay": 1}, "gdn-chunk-prep-decay"},
		{"decay float", []int{1, 2, 3, 1, 32}, Attrs{"exp_g": 1, "decay": 1.0}, "gdn-chunk-prep-decay"},
		{"decay row shape", []int{1, 2, 3, 32, 32}, Attrs{"exp_g": 1, "decay": 1}, "gdn-chunk-prep-decay"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := shapeGDNChunkPrep(in(c.gamma...), c.attrs)
			if c.rule != "" {
				if err == nil || !strings.Contains(err.Error(), "rule "+c.rule) {
					t.Errorf("error %v, want rule %s", err, c.rule)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("types (-want +got):\n%s", diff)
			}
		})
	}
}
