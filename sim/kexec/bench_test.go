package kexec_test

import (
	"path/filepath"
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
// on both devices, the kernel executor's hot path.
func BenchmarkRunSmallQwen(b *testing.B) {
	args := models.Args{"config": filepath.Join("..", "..", "models", "qwen27b", "testdata", "small.json"), "batch": "1", "max-seq": "128", "seq": "32", "mode": "decode"}
	mesh := ir.Mesh{Rows: 1, Cols: 2}
	m := qwen27b.Model{}
	g, err := m.Build(args, mesh)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := passes.Run(g, passes.Options{}); err != nil {
		b.Fatal(err)
	}
	bd, err := codegen.Compile(g, target.Blackhole())
	if err != nil {
		b.Fatal(err)
	}
	envs, err := m.DeviceEnv(args, g, 1)
	if err != nil {
		b.Fatal(err)
	}
	ins, err := m.StepInputs(args, g, [][]int{{1}}, 0)
	if err != nil {
		b.Fatal(err)
	}
	for d := range envs {
		for v, data := range ins[d] {
			envs[d][v] = data
		}
	}
	rt, err := runtime.Open("sim", mesh)
	if err != nil {
		b.Fatal(err)
	}
	exe, err := runtime.Load(rt, bd)
	if err != nil {
		b.Fatal(err)
	}
	for d, env := range envs {
		for v, data := range env {
			if err := exe.UploadTo(d, v, data); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := exe.Run(); err != nil {
			b.Fatal(err)
		}
	}
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
