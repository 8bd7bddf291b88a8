package kir

import (
	"bufio"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
)

// calibration is one measured kernel of testdata/codesize.tsv.
type calibration struct {
	kernel, program, processor string
	real                       int // the largest image of the kernel's processors
	terms                      map[string]int
}

// readCalibration parses testdata/codesize.tsv (see its header).
func readCalibration(t *testing.T) []calibration {
	t.Helper()
	f, err := os.Open("testdata/codesize.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []calibration
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		col := strings.Split(line, "\t")
		if len(col) != 5 {
			t.Fatalf("codesize.tsv: %d columns in %q; want 5", len(col), line)
		}
		c := calibration{kernel: col[0], program: col[1], processor: col[2]}
		for _, img := range strings.Split(col[3], ",") {
			_, v, _ := strings.Cut(img, "=")
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("codesize.tsv: image %q of %s: %v", img, c.kernel, err)
			}
			c.real = max(c.real, n)
		}
		if err := json.Unmarshal([]byte(col[4]), &c.terms); err != nil {
			t.Fatalf("codesize.tsv: terms of %s: %v", c.kernel, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Calibrated bounds of the estimate against the measured images: never
// below the real size; for kernels of 4 KiB or more (the ones the limits
// are about) at most 1.5 times it; for the small ones, whose fixed part
// dominates, at most 3 times.
const (
	calibrationLargeBytes = 4096
	calibrationLargeBound = 1.5
	calibrationSmallBound = 3.0
)

// TestCodeEstimateCalibration checks the cost table against every
// measured kernel: the estimate from the kernel's terms is at least its
// real image and within the calibrated bound.
func TestCodeEstimateCalibration(t *testing.T) {
	cal := readCalibration(t)
	if len(cal) < 50 {
		t.Fatalf("codesize.tsv holds %d kernels; want the whole measured sample", len(cal))
	}
	worst := 0.0
	for _, c := range cal {
		for key := range c.terms {
			if _, ok := codeCost[key]; !ok {
				t.Errorf("%s: term %q has no cost", c.kernel, key)
			}
		}
		est := estimateFromTerms(c.processor == "compute", c.terms).Bytes
		ratio := float64(est) / float64(c.real)
		bound := calibrationSmallBound
		if c.real >= calibrationLargeBytes {
			bound = calibrationLargeBound
			worst = max(worst, ratio)
		}
		if est < c.real || ratio > bound {
			t.Errorf("%s (%s, %s): estimate %d bytes, real %d (ratio %.2f); want within [1, %.1f]", c.kernel, c.program, c.processor, est, c.real, ratio, bound)
		}
	}
	t.Logf("%d kernels; worst ratio of the estimate to the real image for kernels of %d bytes or more: %.2f", len(cal), calibrationLargeBytes, worst)
}

// TestEveryInstructionHasACodeCost: the estimate prices every instruction
// kernel IR has, so a new one cannot silently cost nothing.
func TestEveryInstructionHasACodeCost(t *testing.T) {
	for _, s := range Instructions() {
		key := stmtTerm(s)
		if key == "" {
			continue
		}
		if _, ok := codeCost[key]; !ok {
			t.Errorf("%T (%s) has no entry in codeCost", s, key)
		}
	}
}
