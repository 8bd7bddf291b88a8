package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/target"
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
)

// checkDeviceMemory refuses g, before anything is compiled, when its
// buffers do not fit one device's DRAM (rule dram-capacity,
// codegen.CheckMemory), with the numbers per device and what would fit:
// a shorter --max-seq, a smaller --batch (for models that have them), a
// wider mesh.
func checkDeviceMemory(name string, m models.Model, mf *modelFlags, g *ir.Graph) (codegen.MemoryUse, error) {
	bh := target.Blackhole()
	u, err := codegen.CheckMemory(g, bh)
	if _, over := err.(*codegen.DRAMError); !over {
		return u, err
	}
	return u, &dramFitError{fmt.Sprintf("%s does not fit a %s device's DRAM on mesh %s (rule dram-capacity): per device %s; nothing was compiled. %s",
		name, bh.Name, g.Mesh, u, memoryAdvice(m, mf, g, u))}
}

// dramFitError is checkDeviceMemory's refusal of a build that does not fit
// the device's DRAM (tcc perf --prefill-chunk auto skips such a chunk).
type dramFitError struct{ msg string }

func (e *dramFitError) Error() string { return e.msg }

// memoryAdvice says what would fit: the longest --max-seq at this batch,
// the largest --batch at this --max-seq, the first wider mesh that fits,
// each checked by building its graph; or, when nothing of that fits,
// what the buffers without the KV caches need.
func memoryAdvice(m models.Model, mf *modelFlags, g *ir.Graph, u codegen.MemoryUse) string {
	args, err := mf.args(m)
	if err != nil {
		return ""
	}
	bh := target.Blackhole()
	// use builds the graph with the flags changed on mesh and returns
	// its memory, or false when it does not build.
	use := func(set map[string]string, mesh ir.Mesh) (codegen.MemoryUse, bool) {
		a := models.Args{}
		for k, v := range args {
			a[k] = v
		}
		for k, v := range set {
			a[k] = v
		}
		sg, err := m.Build(a, mesh)
		if err != nil {
			return codegen.MemoryUse{}, false
		}
		if _, err := mf.pipeline(sg); err != nil {
			return codegen.MemoryUse{}, false
		}
		su, err := codegen.GraphMemory(sg, bh)
		return su, err == nil
	}
	room := u.Capacity - (u.Total - u.KV) // what the KV caches may take
	var ways []string
	// fit finds the largest value of flag (now cur, KV linear in it) that
	// fits, a multiple of step, checking the estimate by building it.
	fit := func(flag string, cur, step int) {
		if !modelHas(m, flag) || u.KV <= 0 || cur <= step {
			return
		}
		v := int(float64(room) / float64(u.KV) * float64(cur))
		v = min(v/step*step, cur-step)
		for tries := 0; v >= step && tries < 4; tries++ {
			su, ok := use(map[string]string{flag: strconv.Itoa(v)}, g.Mesh)
			if ok && su.Fits() {
				ways = append(ways, fmt.Sprintf("--%s %d (%s of KV caches, %s free)", flag, v, target.HumanBytes(su.KV), target.HumanBytes(su.Free())))
				return
			}
			v = (v * 9 / 10) / step * step
		}
	}
	if s, ok := args["max-seq"]; ok {
		if n, err := strconv.Atoi(s); err == nil {
			fit("max-seq", n, ir.TileSize)
		}
	}
	if s, ok := args["batch"]; ok {
		if n, err := strconv.Atoi(s); err == nil {
			fit("batch", n, 1)
		}
	}
	for cols := g.Mesh.Cols * 2; cols <= g.Mesh.Cols*8; cols *= 2 {
		mesh := ir.Mesh{Rows: g.Mesh.Rows, Cols: cols}
		if su, ok := use(nil, mesh); ok && su.Fits() {
			ways = append(ways, fmt.Sprintf("--mesh %s (%s per device, the weights and KV heads cut over more cards)", mesh, target.HumanBytes(su.Total)))
			break
		}
	}
	if len(ways) == 0 {
		return fmt.Sprintf("Without the KV caches the buffers need %s per device; shorten --max-seq, lower --batch or use a wider --mesh.", target.HumanBytes(u.Total-u.KV))
	}
	return "What fits: " + strings.Join(ways, "; or ") + "."
}
