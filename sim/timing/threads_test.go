package timing

import (
	"strings"
	"testing"
)

// TestWriteThreadsLinkFloor checks that --threads prints a program's link
// floor and its ratio when the program sends over ethernet, and no floor
// line when it does not.
func TestWriteThreadsLinkFloor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		floor float64
		want  string
	}{
		{"ring", 441.32, "link floor: 441.32 us (10485760 bytes on the busiest direction of a link at the link rate); program / floor 1.80x"},
		{"no ethernet", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{DeviceStepUS: []float64{1}, Programs: []ProgramRow{{Op: "all_reduce_add_rmsnorm", US: 794.376, LinkFloorUS: tc.floor, LinkBytes: 10485760,
				Threads: []ThreadTime{{Kernel: "eth_sender", FinishUS: 614}}}}}
			var b strings.Builder
			if err := r.WriteThreads(&b, "all_reduce_add_rmsnorm"); err != nil {
				t.Fatal(err)
			}
			got := b.String()
			if has := strings.Contains(got, "link floor"); has != (tc.want != "") || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("WriteThreads:\n%s\nwant the line %q", got, tc.want)
			}
		})
	}
}
