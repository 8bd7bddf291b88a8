package kexec_test

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir/kirtest"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/qwen27b"
	"github.com/tcc-dev/tcc/passes"
	"github.com/tcc-dev/tcc/runtime"
	"github.com/tcc-dev/tcc/sim/kexec"
)

// BenchmarkRunSmallQwen is `tcc run` of one decode step of the small
// qwen27b config on a simulated 1x2 mesh: every program of the fused build
// on both devices, the kernel executor's hot path. Besides the wall time
// it reports the CPU time (cpu-s/op), which a busy machine disturbs less.
func BenchmarkRunSmallQwen(b *testing.B) {
	exe := smallQwenStep(b)
	var r0, r1 syscall.Rusage
	b.ResetTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	for i := 0; i < b.N; i++ {
		if err := exe.Run(); err != nil {
			b.Fatal(err)
		}
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := func(r syscall.Rusage) float64 {
		return float64(r.Utime.Nano()+r.Stime.Nano()) / 1e9
	}
	b.ReportMetric((cpu(r1)-cpu(r0))/float64(b.N), "cpu-s/op")
}

// smallQwenStep loads the fused decode step of the small qwen27b config on
// a simulated 1x2 mesh with its weights, state and the inputs of token 1
// at position 0.
func smallQwenStep(b *testing.B) *runtime.Executable {
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	args := models.Args{"config": filepath.Join("..", "..", "models", "qwen27b", "testdata", "small.json"), "batch": "1", "max-seq": "128", "seq": "32", "mode": "decode"}
	mesh, m := ir.Mesh{Rows: 1, Cols: 2}, qwen27b.Model{}
	g, err := m.Build(args, mesh)
	must(err)
	_, err = passes.Run(g, passes.Options{})
	must(err)
	bd, err := codegen.Compile(g, target.Blackhole())
	must(err)
	envs, err := m.DeviceEnv(args, g, 1)
	must(err)
	ins, err := m.StepInputs(args, g, [][]int{{1}}, 0)
	must(err)
	rt, err := runtime.Open("sim", mesh)
	must(err)
	exe, err := runtime.Load(rt, bd)
	must(err)
	for d, env := range envs {
		for _, vals := range []map[*ir.Value][]float32{env, ins[d]} {
			for v, data := range vals {
				must(exe.UploadTo(d, v, data))
			}
		}
	}
	return exe
}

// BenchmarkInterp runs kirtest.PingPong on 8 cores: the executor's control flow,
// expressions and CB and semaphore bookkeeping without data-heavy calls.
func BenchmarkInterp(b *testing.B) {
	p := kirtest.PingPong(8, 20000)
	for i := 0; i < b.N; i++ {
		d := kexec.NewDevice(bh)
		if _, err := d.Run(p, kexec.RunOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
