package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/persist"
)

// persistentFiles renders b as ONE persistent program per device
// (persist.Build, with its early begins, and persist.WithTables): kernels/<role>_<hash>.cpp for the
// merged kernels (codegen/cpp: phases sharing code) and programs.json with
// one program per device whose config carries the persistent section
// (hostcfg.Persistent). It prints the merged kernels' estimated code per
// RISC, shared and as it would be with every phase inlined, to w, before
// any code-size or compute-configuration error.
func persistentFiles(w io.Writer, b *codegen.Build, info hostcfg.HostInfo) (map[string][]byte, error) {
	t := b.Target
	prog, plan, err := persist.Build(b)
	if err != nil {
		return nil, err
	}
	if n := len(plan.FP32Dest); n > 0 {
		f := plan.FP32Dest[0]
		fmt.Fprintf(w, "persistent DEST: %d phases' compute kernels (first: phase %d's %s, %s) run with fp32 DEST, as the other phases of their merged compute binaries\n",
			n, f.Phase, f.Kernel, prog.Persist.Phases[f.Phase].Name)
	}
	est := map[*kir.Kernel]kir.CodeEstimate{}
	type worst struct {
		shared, inlined int
		kernel          string
		phases, bodies  int
	}
	per := map[string]*worst{}
	var order []string
	for _, k := range prog.Kernels {
		pc, err := cpp.EstimatePersistentKernel(prog, k)
		if err != nil {
			return nil, err
		}
		est[k] = pc.Shared
		risc := riscLabel(k)
		wv := per[risc]
		if wv == nil {
			wv = &worst{}
			per[risc] = wv
			order = append(order, risc)
		}
		wv.inlined = max(wv.inlined, pc.Inlined.Bytes)
		if pc.Shared.Bytes > wv.shared {
			wv.shared, wv.kernel, wv.phases, wv.bodies = pc.Shared.Bytes, k.Name, pc.Phases, pc.Bodies
		}
	}
	for _, r := range order {
		wv := per[r]
		fmt.Fprintf(w, "persistent %s: largest merged kernel %s, estimated code %.1f KiB (%d phases, %d distinct bodies); %.1f KiB with every phase in line\n",
			r, wv.kernel, float64(wv.shared)/1024, wv.phases, wv.bodies, float64(wv.inlined)/1024)
	}
	img := kir.EstimatePersistentImages(prog, t, func(k *kir.Kernel) kir.CodeEstimate { return est[k] })
	fmt.Fprintf(w, "persistent images: %.1f KiB of L1 on core %s (%s, outside the %.1f KiB kernel config ring)\n",
		float64(img.Bytes)/1024, img.Core, kir.TextBuffer, float64(t.Code.RingBytes)/1024)
	if err := persist.WithTables(prog, b); err != nil {
		return nil, err
	}
	r := kir.PersistentRing(prog, t)
	fmt.Fprintf(w, "persistent ring: %d bytes of the %d-byte kernel config ring (arguments %d: persist_ctl and persist_tables per RISC; semaphores %d, CB configs %d); the merged kernels' argument vectors: %.1f KiB in %s on core %s\n",
		r.Bytes(), t.Code.RingBytes, r.RuntimeArgs+r.CommonArgs, r.Semaphores, r.CBConfigs, float64(r.TablesArgs)/1024, kir.TablesBuffer, r.TablesCore)
	files, cfg, err := persist.Sources(prog, t)
	if err != nil {
		return nil, err
	}
	man, err := b.Manifest(info)
	if err != nil {
		return nil, err
	}
	devices := b.Graph.Mesh.Devices()
	pf := codegen.ProgramsFile{Model: b.Graph.Name, Mesh: b.Graph.Mesh.String(), Devices: devices, Manifest: man}
	for name := range files { // the kernel sources, the headers not counted
		if strings.HasSuffix(name, ".cpp") {
			pf.Kernels++
		}
	}
	for d := 0; d < devices; d++ {
		pf.Programs = append(pf.Programs, codegen.ProgramEntry{Device: d, Index: 0, Op: "persistent", Layer: -1, Region: "persistent", ProgramConfig: cfg})
	}
	js, err := json.MarshalIndent(pf, "", "  ")
	if err != nil {
		return nil, err
	}
	files["programs.json"] = append(js, '\n')
	return files, nil
}

// riscLabel names the RISC a merged kernel runs on, for the code report.
func riscLabel(k *kir.Kernel) string {
	switch {
	case k.OnEth():
		return "ERISC"
	case k.Processor == kir.RISCV0:
		return "BRISC"
	case k.Processor == kir.RISCV1:
		return "NCRISC"
	}
	return "TRISC"
}
