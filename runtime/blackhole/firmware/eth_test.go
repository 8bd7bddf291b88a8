package firmware

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/target"
)

// TestEthPlacement checks where each ERISC's firmware segments go: L1
// text at its link address inside the ERISC's firmware region, core-local
// data at the ERISC's init scratch (ERISC0's linked above the base
// firmware's 0x700 local bytes, which the offset drops: bh_hal.cpp
// relocate_func_), and that a segment outside the region is an error
// naming the ERISC.
func TestEthPlacement(t *testing.T) {
	l, e := target.BlackholeLayout(), target.BlackholeActiveEth()
	d := []byte{1, 2, 3, 4}
	tests := []struct {
		name    string
		erisc   int
		segs    []Segment
		want    []uint32
		wantErr string
	}{
		{"ERISC0", 0, []Segment{{0x3330, d}, {0xFFB00700, d}, {0xFFB00710, d}}, []uint32{0x3330, 0xF330, 0xF340}, ""},
		{"ERISC1", 1, []Segment{{0x9330, d}, {0xFFB00000, d}}, []uint32{0x9330, 0x10C30}, ""},
		{"ERISC1 text in ERISC0's region", 1, []Segment{{0x3330, d}}, nil, "outside ERISC1's firmware region [0x9330, 0xf330)"},
		{"ERISC0 local data in the base firmware's", 0, []Segment{{0xFFB00100, d}}, nil, "below the base firmware's 1792 B"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EthPlacement(&Image{Path: "fw", Segments: tc.segs}, tc.erisc, l, e)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var addrs []uint32
			for _, s := range got {
				addrs = append(addrs, s.Addr)
			}
			if diff := cmp.Diff(tc.want, addrs); diff != "" {
				t.Errorf("placed addresses (-want +got):\n%s", diff)
			}
		})
	}
}
