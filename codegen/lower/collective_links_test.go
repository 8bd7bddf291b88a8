package lower

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
)

// linkDirections lists, per physical link of tgt's two-chip ring (in
// logical channels, target.MeshLinks), the directions program p sends on:
// "A->B" when a sender kernel runs on A's channel (every chip runs the
// same program, so chip A's end sends) and a receiver on B's, "B->A"
// likewise. A handshake channel (the kernel's ERISC) must match at both
// ends, or the direction does not count.
func linkDirections(t *testing.T, p *kir.Program, tgt *target.Target) []string {
	t.Helper()
	links, err := tgt.MeshLinks(2)
	require.NoError(t, err)
	type end struct{ ch, erisc int }
	send, recv := map[end]bool{}, map[end]bool{}
	for _, k := range p.Kernels {
		if !k.OnEth() {
			continue
		}
		for _, r := range k.Cores {
			for ch := r.X0; ch <= r.X1; ch++ {
				e := end{ch, kir.EthChannel(k.Processor)}
				switch {
				case strings.HasPrefix(k.Name, "eth_sender"):
					send[e] = true
				case strings.HasPrefix(k.Name, "eth_receiver"):
					recv[e] = true
				}
			}
		}
	}
	var dirs []string
	for _, l := range links {
		ab, ba := false, false
		for erisc := range kir.EthHandshakeChannels {
			ab = ab || send[end{l.A.Channel, erisc}] && recv[end{l.B.Channel, erisc}]
			ba = ba || send[end{l.B.Channel, erisc}] && recv[end{l.A.Channel, erisc}]
		}
		var d []string
		if ab {
			d = append(d, "A->B")
		}
		if ba {
			d = append(d, "B->A")
		}
		dirs = append(dirs, fmt.Sprintf("%s: %s", l, strings.Join(d, " ")))
	}
	return dirs
}

// TestPrefillRingUsesEveryLinkBothWays lowers the two-card all-reduce of
// a prefill activation (with and without the fused add and norm) on every
// topology and checks, from the program's ethernet kernels, that every
// physical link carries it in both directions: the p150a pair's four
// links and the P300's two. One way (RingOptions.OneWay, the ring before)
// each link carries one direction only, which the check tells apart.
func TestPrefillRingUsesEveryLinkBothWays(t *testing.T) {
	for _, topo := range target.TopologyNames() {
		for _, tc := range []struct {
			name   string
			norm   bool
			oneWay bool
		}{
			{"all_reduce", false, false},
			{"all_reduce_add_rmsnorm", true, false},
			{"all_reduce_add_rmsnorm one way", true, true},
		} {
			t.Run(topo+" "+tc.name, func(t *testing.T) {
				tp, err := target.LookupTopology(topo)
				require.NoError(t, err)
				tgt, err := target.Blackhole().WithTopology(tp, 2)
				require.NoError(t, err)
				b := ir.NewBuilder("ring")
				b.G.Mesh = ir.Mesh{Rows: 1, Cols: 2}
				xt := ir.T(ir.BF16, 1, 256, 5120)
				x, r := b.Input("x", xt), b.Input("residual", xt)
				b.Region("ccl", 0)
				if tc.norm {
					b.Output(b.AllReduceAddRMSNorm(x, r, b.Weight("w", ir.T(ir.BF16, 5120)), 2, 1e-6, 1)...)
				} else {
					b.Output(b.AllReduce(x, 2))
				}
				g, err := b.Finish()
				require.NoError(t, err)
				ops := g.Ops()
				ctx := NewContext(tgt)
				ctx.Ring.OneWay = tc.oneWay
				p, err := Lower(ops[len(ops)-1], ctx)
				require.NoError(t, err)
				require.NoError(t, kir.Validate(p, tgt))
				links, err := tgt.MeshLinks(2)
				require.NoError(t, err)
				got := linkDirections(t, p, tgt)
				var both []string
				for _, l := range links {
					both = append(both, fmt.Sprintf("%s: A->B B->A", l))
				}
				if diff := cmp.Diff(both, got); (diff == "") == tc.oneWay {
					t.Errorf("links used both ways: %t, want %t; directions per link (-both ways +got):\n%s", diff == "", !tc.oneWay, diff)
				}
				if !tc.oneWay {
					t.Logf("%d links, each both ways", len(links))
				}
				if tc.norm && !tc.oneWay && topo == target.DefaultTopology {
					// The ERISC1 kernels hand packets over on handshake
					// channels 1, 3 and 5 (three in flight), ERISC0's on 0,
					// 2 and 4.
					for name, ch := range map[string]string{
						"eth_sender": "eth_wait_for_receiver_channel_done(4);", "eth_sender_back": "eth_wait_for_receiver_channel_done(5);",
						"eth_receiver": "eth_receiver_channel_done(ch);", "eth_receiver_back": "ch = 1u + pk_2 % 3u * 2u;",
					} {
						src, err := cpp.PrintKernel(p, p.Kernel(name))
						require.NoError(t, err)
						require.Contains(t, string(src), ch, "%s's packets rotate over its ERISC's three handshake channels", name)
						// ERISC1's kernels send on TX queue 1 (set up first),
						// ERISC0's on the release's queue 0 (kir.EthTXQ).
						back := strings.HasSuffix(name, "_back")
						for _, want := range []string{"internal_::eth_send_packet(1,", "eth_enable_packet_mode(1);"} {
							require.Equal(t, back, strings.Contains(string(src), want), "%s contains %q", name, want)
						}
					}
					dir, sources := t.TempDir(), map[string]cpp.Source{}
					writeKernels(t, dir, "ring", p, sources)
					checkKernelSyntax(t, "both-ways ring kernels", dir, sources, true)
				}
			})
		}
	}
}
