package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
)

// CacheSchema is the version of manifest.json.
const CacheSchema = 1

// ManifestFile is the name of a cache's manifest.
const ManifestFile = "manifest.json"

// ConfigFile is the model config a cache records (see Source.ModelConfig).
const ConfigFile = "config.json"

// Packer names the block-float packer of the cache's bytes.
const Packer = "tt-metal host packer (blockfloat_common.cpp convert_u32_to_bfp, round to nearest even after truncating by the exponent gap)"

// CacheManifest describes a device-ready weight cache.
type CacheManifest struct {
	Schema     int    `json:"schema"`
	TCCVersion string `json:"tcc_version"`
	Model      string `json:"model"`
	Mesh       string `json:"mesh"`
	Devices    int    `json:"devices"`
	// Contract is the sha256 of the build's weight buffers and sources
	// (what the cache was converted for).
	Contract string   `json:"contract_sha256"`
	Packer   string   `json:"packer"`
	Complete bool     `json:"complete"`
	Files    []string `json:"files"` // one per device
	// Config names the model config the cache was converted for, a file
	// in the cache ("config.json"; empty: not recorded).
	Config  string       `json:"config,omitempty"`
	Tensors []CacheEntry `json:"tensors"`
}

// CacheEntry is one weight buffer of the cache: at Offset in every
// device file, Size bytes, with Results[d] the sha256 of device d's bytes.
type CacheEntry struct {
	Buffer   string               `json:"buffer"`
	Source   hostcfg.WeightSource `json:"source"`
	Storage  Kind                 `json:"storage"`
	DType    string               `json:"dtype"`
	Layout   string               `json:"layout"`
	Shape    []int                `json:"shape"`
	PageSize int                  `json:"page_size"`
	Pages    int                  `json:"pages"`
	Inputs   []InputSum           `json:"inputs"`
	Offset   int64                `json:"offset"`
	Size     int64                `json:"size"`
	Results  []string             `json:"results_sha256"`
}

// InputSum identifies one checkpoint tensor a buffer was converted from:
// the checksum of its raw bytes, and its dtype and shape (the same bytes
// under another shape or dtype are another tensor, not a reusable one).
type InputSum struct {
	Tensor string `json:"tensor"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
	DType  string `json:"dtype"`
	Shape  string `json:"shape"`
}

// Progress reports a conversion's advance: tensors and source bytes done
// of the totals (Skipped: the buffer was already in a partial cache).
type Progress struct {
	Buffer                 string
	TensorsDone, Tensors   int
	BytesDone, Bytes       int64
	Skipped, Reused, Final bool
}

// ContractOf is Contract of pf's weights, without a checkpoint: the
// value a cache converted for pf records. Weights without a buffer
// entry or source are an error.
func ContractOf(pf *codegen.ProgramsFile) (string, error) {
	if pf == nil || pf.Manifest == nil {
		return "", fmt.Errorf("checkpoint: the build has no manifest")
	}
	bufs := map[string]codegen.BufferEntry{}
	for _, b := range pf.Buffers {
		bufs[b.Name] = b
	}
	var items []Item
	for _, w := range pf.Weights {
		b, ok := bufs[w.Buffer]
		if !ok || w.Source == nil {
			return "", fmt.Errorf("checkpoint: weight buffer %q has no buffer entry or source", w.Buffer)
		}
		items = append(items, Item{Buffer: b, Source: *w.Source})
	}
	return Contract(items), nil
}

// Contract returns the sha256 of the items' buffers and sources.
func Contract(items []Item) string {
	type c struct {
		B codegen.BufferEntry
		S hostcfg.WeightSource
	}
	var cs []c
	for _, it := range items {
		cs = append(cs, c{it.Buffer, it.Source})
	}
	b, _ := json.Marshal(cs)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (s *Source) inputSums(it Item) ([]InputSum, int64, error) {
	var out []InputSum
	var total int64
	for _, p := range it.Weight.Parts {
		b, err := s.Ckpt.Bytes(p)
		if err != nil {
			return nil, 0, err
		}
		// Hash in 64 MiB steps, releasing each step's mapped pages, so a
		// 2.5 GB embedding never sits in memory whole.
		h := sha256.New()
		const step = 64 << 20
		for lo := 0; lo < len(b); lo += step {
			hi := min(lo+step, len(b))
			h.Write(b[lo:hi])
			s.Ckpt.Release(p, int64(lo), int64(hi))
		}
		info, _, err := s.Ckpt.Info(p)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, InputSum{Tensor: p, SHA256: hex.EncodeToString(h.Sum(nil)), Bytes: int64(len(b)),
			DType: fmt.Sprint(info.DType), Shape: fmt.Sprint(info.Shape)})
		total += int64(len(b))
	}
	return out, total, nil
}

func sourceBytes(s *Source, it Item) int64 {
	var n int64
	for _, p := range it.Weight.Parts {
		if t, _, err := s.Ckpt.Info(p); err == nil {
			n += t.End - t.Begin
		}
	}
	return n
}

func deviceFile(d int) string { return fmt.Sprintf("device-%d.bin", d) }

// ConvertCache converts every weight of pf from s into the cache
// directory dir (see the package documentation) and returns its manifest
// and whether an existing complete cache was reused. On error the
// partial files it wrote are removed (and dir, when it created it and it
// is empty); only an interrupted process leaves *.partial files, which
// the next call resumes from. A complete cache in dir that cannot be
// reused is replaced only once its successor is complete: the new one is
// converted in the sibling ".DIR.staging" and swapped in.
func ConvertCache(s *Source, pf *codegen.ProgramsFile, dir string, progress func(Progress)) (_ *CacheManifest, reused bool, err error) {
	if progress == nil {
		progress = func(Progress) {}
	}
	items, err := s.Plan(pf)
	if err != nil {
		return nil, false, err
	}
	n := pf.Devices
	if n < 1 {
		return nil, false, fmt.Errorf("checkpoint: programs.json declares %d devices", n)
	}
	man := &CacheManifest{Schema: CacheSchema, TCCVersion: codegen.Version, Model: pf.Model, Mesh: pf.Mesh, Devices: n,
		Contract: Contract(items), Packer: Packer, Tensors: []CacheEntry{}}
	for d := 0; d < n; d++ {
		man.Files = append(man.Files, deviceFile(d))
	}
	var total int64
	for _, it := range items {
		total += sourceBytes(s, it)
	}
	final := filepath.Join(dir, ManifestFile)
	staging := filepath.Join(filepath.Dir(filepath.Clean(dir)), "."+filepath.Base(filepath.Clean(dir))+".staging")
	old, err := readManifest(final)
	if err != nil || !old.Complete {
		// No complete cache: convert in dir itself (resuming its partial files).
		m, err := convertInto(s, items, man, dir, total, progress)
		return m, false, err
	}
	if old.Contract == man.Contract {
		if ok, _ := verify(s, dir, old, items, len(items), ""); ok == len(items) {
			if IsCache(staging) {
				os.RemoveAll(staging) // an interrupted replacement, now moot
			}
			progress(Progress{TensorsDone: len(items), Tensors: len(items), BytesDone: total, Bytes: total, Reused: true, Final: true})
			return old, true, nil
		}
	}
	// A complete cache for another build or other source bytes: convert
	// beside it (resuming an interrupted replacement) and swap the result
	// in, so an interrupted or failed conversion leaves the cache as it was.
	if _, err := convertInto(s, items, man, staging, total, progress); err != nil {
		os.Remove(staging) // only when empty
		return nil, false, err
	}
	if err := codegen.ExchangeDirs(staging, dir); err != nil {
		return nil, false, fmt.Errorf("checkpoint: cache %s: replacing it with %s: %v", dir, staging, err)
	}
	if err := os.RemoveAll(staging); err != nil { // now the old cache
		return nil, false, fmt.Errorf("checkpoint: cache %s: removing the old cache: %v", dir, err)
	}
	return man, false, nil
}

// convertInto converts items into dir, resuming from its partial files;
// on error it removes what it wrote (and dir when it created it).
func convertInto(s *Source, items []Item, man *CacheManifest, dir string, total int64, progress func(Progress)) (_ *CacheManifest, err error) {
	n := man.Devices
	created := false
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		created = true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint: cache %s: %v", dir, err)
	}
	final := filepath.Join(dir, ManifestFile)
	partial := final + ".partial"
	os.Remove(final) // incomplete or stale: the device files are rewritten below
	done := 0
	if old, err := readManifest(partial); err == nil && old.Contract == man.Contract && old.Devices == n {
		done, _ = verify(s, dir, old, items, len(old.Tensors), ".partial")
		man.Tensors = old.Tensors[:done]
	}
	files := make([]*os.File, n)
	cleanup := func() {
		for d, f := range files {
			if f != nil {
				f.Close()
			}
			os.Remove(filepath.Join(dir, deviceFile(d)+".partial"))
		}
		os.Remove(partial)
		if created {
			os.Remove(dir) // only succeeds when empty
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	var offset int64
	if done > 0 {
		last := man.Tensors[done-1]
		offset = last.Offset + last.Size
	}
	for d := range files {
		p := filepath.Join(dir, deviceFile(d)+".partial")
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: cache %s: %v", dir, err)
		}
		files[d] = f
		if err := f.Truncate(offset); err != nil {
			return nil, fmt.Errorf("checkpoint: cache %s: %v", p, err)
		}
	}
	var bytesDone int64
	for i, it := range items[:done] {
		bytesDone += sourceBytes(s, it)
		progress(Progress{Buffer: it.Buffer.Name, TensorsDone: i + 1, Tensors: len(items), BytesDone: bytesDone, Bytes: total, Skipped: true})
	}
	for i := done; i < len(items); i++ {
		it := items[i]
		sums, nb, err := s.inputSums(it)
		if err != nil {
			return nil, err
		}
		ws := make([]io.WriterAt, n)
		for d := range ws {
			ws[d] = &offsetWriter{files[d], offset}
		}
		if err := s.Convert(it, ws); err != nil {
			return nil, err
		}
		hs := make([]hash.Hash, n)
		for d := range hs {
			hs[d] = sha256.New()
			if _, err := io.Copy(hs[d], io.NewSectionReader(files[d], offset, it.Bytes())); err != nil {
				return nil, fmt.Errorf("checkpoint: cache %s: %v", files[d].Name(), err)
			}
		}
		e := CacheEntry{Buffer: it.Buffer.Name, Source: it.Source, Storage: it.Weight.Kind, DType: it.Buffer.DType, Layout: it.Buffer.Layout,
			Shape: it.Buffer.Shape, PageSize: it.Buffer.PageSize, Pages: it.Buffer.Pages, Inputs: sums, Offset: offset, Size: it.Bytes()}
		for d := range hs {
			e.Results = append(e.Results, hex.EncodeToString(hs[d].Sum(nil)))
		}
		offset += e.Size
		man.Tensors = append(man.Tensors, e)
		if err := writeManifest(partial, man); err != nil {
			return nil, err
		}
		bytesDone += nb
		progress(Progress{Buffer: it.Buffer.Name, TensorsDone: i + 1, Tensors: len(items), BytesDone: bytesDone, Bytes: total})
	}
	for d, f := range files {
		// The partial manifest is not synced with the data: a resume
		// re-checks every recorded result, so only the final files must
		// be durable before the manifest names them.
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("checkpoint: cache %s: %v", f.Name(), err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("checkpoint: cache %s: %v", f.Name(), err)
		}
		files[d] = nil
		if err := os.Rename(filepath.Join(dir, deviceFile(d)+".partial"), filepath.Join(dir, deviceFile(d))); err != nil {
			return nil, fmt.Errorf("checkpoint: cache %s: %v", dir, err)
		}
	}
	cfg := filepath.Join(dir, ConfigFile)
	if len(s.ModelConfig) > 0 {
		if err := codegen.WriteFileAtomic(cfg, s.ModelConfig); err != nil {
			return nil, fmt.Errorf("checkpoint: cache %s: %v", dir, err)
		}
		man.Config = ConfigFile
	} else {
		os.Remove(cfg) // a previous conversion's
	}
	man.Complete = true
	if err := writeManifest(final, man); err != nil {
		return nil, err
	}
	os.Remove(partial)
	progress(Progress{TensorsDone: len(items), Tensors: len(items), BytesDone: total, Bytes: total, Final: true})
	return man, nil
}

func readManifest(path string) (*CacheManifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m CacheManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %v", path, err)
	}
	if m.Schema != CacheSchema {
		return nil, fmt.Errorf("checkpoint: %s: schema %d, want %d", path, m.Schema, CacheSchema)
	}
	return &m, nil
}

func writeManifest(path string, m *CacheManifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return codegen.WriteFileAtomic(path, append(b, '\n'))
}

// verify returns how many leading entries of m (at most limit) match
// items (same buffer and source), the checkpoint's current bytes (input
// checksums) and the device files (suffix "" or ".partial").
func verify(s *Source, dir string, m *CacheManifest, items []Item, limit int, suffix string) (int, error) {
	files := make([]*os.File, m.Devices)
	for d := range files {
		f, err := os.Open(filepath.Join(dir, deviceFile(d)+suffix))
		if err != nil {
			return 0, err
		}
		defer f.Close()
		files[d] = f
	}
	var offset int64
	for i := 0; i < limit && i < len(m.Tensors) && i < len(items); i++ {
		e, it := m.Tensors[i], items[i]
		if e.Buffer != it.Buffer.Name || e.Offset != offset || e.Size != it.Bytes() || len(e.Results) != m.Devices {
			return i, nil
		}
		sums, _, err := s.inputSums(it)
		if err != nil {
			return i, err
		}
		if !equalSums(sums, e.Inputs) {
			return i, nil
		}
		for d, f := range files {
			h := sha256.New()
			if _, err := io.Copy(h, io.NewSectionReader(f, e.Offset, e.Size)); err != nil {
				return i, err
			}
			if sum := hex.EncodeToString(h.Sum(nil)); sum != e.Results[d] {
				return i, nil
			}
			if st, err := f.Stat(); err != nil || st.Size() < e.Offset+e.Size {
				return i, nil
			}
		}
		offset += e.Size
	}
	return min(limit, len(m.Tensors), len(items)), nil
}

func equalSums(a, b []InputSum) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Cache is a loaded, verified cache: every buffer's bytes per device.
type Cache struct {
	Manifest *CacheManifest
	buffers  []map[string][]byte
}

// LoadCache reads the complete cache in dir and checks every result
// checksum. Errors name the file and buffer.
func LoadCache(dir string) (*Cache, error) {
	m, err := readManifest(filepath.Join(dir, ManifestFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if pm, perr := readManifest(filepath.Join(dir, ManifestFile+".partial")); perr == nil {
				return nil, fmt.Errorf("checkpoint: cache %s is incomplete: an interrupted conversion wrote %d weight buffers (%s.partial); run tcc weights convert again to finish it", dir, len(pm.Tensors), ManifestFile)
			} else if !errors.Is(perr, os.ErrNotExist) {
				return nil, fmt.Errorf("checkpoint: cache %s is incomplete (%v); run tcc weights convert again", dir, perr)
			}
			return nil, fmt.Errorf("checkpoint: %s is not a weight cache (no %s)", dir, ManifestFile)
		}
		return nil, err
	}
	if !m.Complete {
		return nil, fmt.Errorf("checkpoint: cache %s is incomplete: %s says complete: false; run tcc weights convert again", dir, ManifestFile)
	}
	if err := checkManifest(dir, m); err != nil {
		return nil, err
	}
	c := &Cache{Manifest: m}
	for d, name := range m.Files {
		p := filepath.Join(dir, name)
		data, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("checkpoint: cache %s is incomplete: %s names %s, which is missing; run tcc weights convert again", dir, ManifestFile, name)
		}
		if err != nil {
			return nil, fmt.Errorf("checkpoint: cache %s: %v", dir, err)
		}
		bufs := map[string][]byte{}
		for _, e := range m.Tensors {
			// checkManifest ruled out negative values, so this cannot overflow.
			if e.Size > int64(len(data))-e.Offset {
				return nil, fmt.Errorf("checkpoint: cache %s: buffer %q [%d, +%d) is outside %s (%d bytes): truncated", dir, e.Buffer, e.Offset, e.Size, p, len(data))
			}
			b := data[e.Offset : e.Offset+e.Size]
			sum := sha256.Sum256(b)
			if hex.EncodeToString(sum[:]) != e.Results[d] {
				return nil, fmt.Errorf("checkpoint: cache %s: buffer %q in %s fails its sha256 check", dir, e.Buffer, p)
			}
			bufs[e.Buffer] = b
		}
		c.buffers = append(c.buffers, bufs)
	}
	return c, nil
}

// IsCache reports whether dir holds a weight cache, complete or not (a
// manifest or a partial one), rather than a checkpoint.
func IsCache(dir string) bool {
	for _, n := range []string{ManifestFile, ManifestFile + ".partial"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	return false
}

// checkManifest checks m's structure before any file is read: one device
// file per device, named as tcc names them (no path leaves dir); every
// entry's offset and size non-negative, their sum representable, one
// result per device; buffer names unique; no two extents overlapping.
func checkManifest(dir string, m *CacheManifest) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("checkpoint: cache %s: %s: %s", dir, ManifestFile, fmt.Sprintf(format, a...))
	}
	if m.Devices < 1 || len(m.Files) != m.Devices {
		return bad("devices is %d with %d files; want one file per device", m.Devices, len(m.Files))
	}
	for d, f := range m.Files {
		if f != deviceFile(d) {
			return bad("files[%d] is %q; want %q", d, f, deviceFile(d))
		}
	}
	seen := map[string]bool{}
	idx := make([]int, len(m.Tensors))
	for i, e := range m.Tensors {
		idx[i] = i
		switch {
		case seen[e.Buffer]:
			return bad("buffer %q appears twice", e.Buffer)
		case e.Offset < 0:
			return bad("buffer %q has offset %d; an offset must be >= 0", e.Buffer, e.Offset)
		case e.Size < 0:
			return bad("buffer %q has size %d; a size must be >= 0", e.Buffer, e.Size)
		case e.Size > math.MaxInt64-e.Offset:
			return bad("buffer %q: offset %d + size %d overflows a file offset", e.Buffer, e.Offset, e.Size)
		case len(e.Results) != m.Devices:
			return bad("buffer %q has %d results_sha256; want one per device (%d)", e.Buffer, len(e.Results), m.Devices)
		}
		seen[e.Buffer] = true
	}
	sort.Slice(idx, func(a, b int) bool { return m.Tensors[idx[a]].Offset < m.Tensors[idx[b]].Offset })
	for k := 1; k < len(idx); k++ {
		p, e := m.Tensors[idx[k-1]], m.Tensors[idx[k]]
		if e.Offset < p.Offset+p.Size {
			return bad("buffer %q [%d, +%d) overlaps buffer %q [%d, +%d); extents must be disjoint", e.Buffer, e.Offset, e.Size, p.Buffer, p.Offset, p.Size)
		}
	}
	return nil
}

// Buffer returns device d's page bytes of buffer name.
func (c *Cache) Buffer(d int, name string) ([]byte, bool) {
	if d < 0 || d >= len(c.buffers) {
		return nil, false
	}
	b, ok := c.buffers[d][name]
	return b, ok
}

// InMemory converts every weight of pf into memory (no cache files).
func InMemory(s *Source, pf *codegen.ProgramsFile) (*Cache, error) {
	items, err := s.Plan(pf)
	if err != nil {
		return nil, err
	}
	c := &Cache{Manifest: &CacheManifest{Schema: CacheSchema, Model: pf.Model, Mesh: pf.Mesh, Devices: pf.Devices, Contract: Contract(items), Complete: true}}
	for d := 0; d < pf.Devices; d++ {
		c.buffers = append(c.buffers, map[string][]byte{})
	}
	for _, it := range items {
		bufs := make([]bytesAt, pf.Devices)
		ws := make([]io.WriterAt, pf.Devices)
		for d := range ws {
			bufs[d] = make(bytesAt, it.Bytes())
			ws[d] = bufs[d]
		}
		if err := s.Convert(it, ws); err != nil {
			return nil, err
		}
		for d := range bufs {
			c.buffers[d][it.Buffer.Name] = bufs[d]
		}
	}
	return c, nil
}

// offsetWriter writes at base+off of a file.
type offsetWriter struct {
	f    *os.File
	base int64
}

func (w *offsetWriter) WriteAt(p []byte, off int64) (int, error) { return w.f.WriteAt(p, w.base+off) }

// bytesAt is a fixed-size in-memory WriterAt.
type bytesAt []byte

func (b bytesAt) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(b)) {
		return 0, fmt.Errorf("write of %d bytes at %d outside a %d-byte buffer", len(p), off, len(b))
	}
	return copy(b[off:], p), nil
}
