package runtime

import (
	"errors"
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/ir/numerics"
	"github.com/tcc-dev/tcc/sim/kexec"
	"github.com/tcc-dev/tcc/sim/ref"
)

// meshGraph builds x -> all_reduce -> add_scalar(0.5) -> all_gather(axis 2)
// on a 1xN mesh: a collective between two per-device programs, then a
// second collective.
func meshGraph(t *testing.T, n int) (*ir.Graph, *ir.Value, []*ir.Value) {
	t.Helper()
	b := ir.NewBuilder("ccl")
	b.G.Mesh = ir.Mesh{Rows: 1, Cols: n}
	x := b.Input("x", ir.T(ir.BF16, 2, 1, 256))
	b.Region("ccl", 0)
	s := b.AllReduce(x, n)
	h := b.AddScalar(s, 0.5)
	g := b.AllGather(h, 2, n)
	b.Output(s)
	b.Output(g)
	gr, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return gr, x, []*ir.Value{s, g}
}

func TestRunWithCollectives(t *testing.T) {
	for _, tc := range []struct {
		n        int
		topology string
	}{{1, ""}, {2, ""}, {4, ""}, {2, "p300"}} {
		n := tc.n
		t.Run(ir.Mesh{Rows: 1, Cols: n}.String()+tc.topology, func(t *testing.T) {
			g, x, outs := meshGraph(t, n)
			tgt := target.Blackhole()
			var tp *target.Topology
			if tc.topology != "" {
				var err error
				if tp, err = target.LookupTopology(tc.topology); err != nil {
					t.Fatal(err)
				}
				if tgt, err = tgt.WithTopology(tp, n); err != nil {
					t.Fatal(err)
				}
			}
			build, err := codegen.Compile(g, tgt)
			if err != nil {
				t.Fatal(err)
			}
			collectives := 0
			for _, p := range build.Programs {
				if IsCollective(p.Kernel) {
					collectives++
				}
			}
			if want := map[int]int{1: 0, 2: 2, 4: 2}[n]; collectives != want {
				t.Errorf("%d collective programs, want %d", collectives, want)
			}
			m, err := Open("sim", g.Mesh)
			if err != nil {
				t.Fatal(err)
			}
			if tp != nil {
				// A mesh cabled otherwise refuses the build.
				if _, err := Load(m, build); err == nil || !strings.Contains(err.Error(), "topology "+tp.Name) {
					t.Fatalf("Load on a %s mesh of a build for %s: error %v, want one naming the topology", target.DefaultTopology, tp.Name, err)
				}
				if err := m.UseTopology(tp); err != nil {
					t.Fatal(err)
				}
			}
			exe, err := Load(m, build)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewSource(int64(n)))
			envs := make([]map[*ir.Value]ref.Tensor, n)
			for d := 0; d < n; d++ {
				data := make([]float32, x.Type.Shape.Numel())
				for i := range data {
					data[i] = numerics.RoundBF16(float32(rng.NormFloat64()))
				}
				if err := exe.UploadTo(d, x, data); err != nil {
					t.Fatal(err)
				}
				envs[d] = map[*ir.Value]ref.Tensor{x: {Shape: x.Type.Shape, Data: data}}
			}
			if err := exe.Run(); err != nil {
				t.Fatal(err)
			}
			want, err := ref.EvalMesh(g, envs, ref.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			for d := 0; d < n; d++ {
				for _, v := range outs {
					got, err := exe.DownloadFrom(d, v)
					if err != nil {
						t.Fatal(err)
					}
					w := want[d][v].Data
					if n <= 2 {
						if diff := cmp.Diff(w, got); diff != "" {
							t.Errorf("device %d %s (-want +got):\n%s", d, v, diff)
						}
					} else if pcc := numerics.PCC(w, got); pcc < 0.9999 {
						t.Errorf("device %d %s: PCC %.6f, want >= 0.9999", d, v, pcc)
					}
				}
			}
		})
	}
}

func TestCollectiveLaunchErrors(t *testing.T) {
	g, _, _ := meshGraph(t, 2)
	build, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	m, err := Open("sim", g.Mesh)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := Load(m, build)
	if err != nil {
		t.Fatal(err)
	}
	var ccl int
	for i, p := range build.Programs {
		if IsCollective(p.Kernel) {
			ccl = i
			break
		}
	}
	p := build.Programs[ccl].Kernel
	if _, err := m.Launch(0, p); err == nil || !strings.Contains(err.Error(), "LaunchCollective") {
		t.Errorf("Launch of a collective on one device: %v, want an error pointing to LaunchCollective", err)
	}
	// A receiver whose sender never sends: the mesh workload deadlocks and
	// the error names the card, the ethernet core and the transfer.
	saved := p.Kernel("eth_sender").Body
	p.Kernel("eth_sender").Body = nil
	err = exe.RunProgram(ccl)
	p.Kernel("eth_sender").Body = saved
	var de *kexec.DeadlockError
	if !errors.As(err, &de) {
		t.Fatalf("RunProgram: %v, want a *kexec.DeadlockError", err)
	}
	if !strings.Contains(err.Error(), `core eth1 kernel "eth_receiver": eth_wait_for_bytes waits for`) || !strings.Contains(err.Error(), "device 1") {
		t.Errorf("the error does not name device, core and transfer:\n%v", err)
	}
}
