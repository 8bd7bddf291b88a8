package safetensors

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// IndexFile and SingleFile are the names a checkpoint directory uses.
const (
	IndexFile  = "model.safetensors.index.json"
	SingleFile = "model.safetensors"
)

// Checkpoint is a directory of safetensors shards: every tensor name
// resolves to the one shard holding it.
type Checkpoint struct {
	Dir    string
	Shards []*File // sorted by path
	where  map[string]*File
}

// OpenDir opens the checkpoint in dir: through model.safetensors.index.json
// when present (every shard it names must exist and hold the tensors the
// weight_map assigns to it), else model.safetensors, else every
// *.safetensors file in dir (a tensor in two files is an error). Only
// headers are read.
func OpenDir(dir string) (*Checkpoint, error) {
	c := &Checkpoint{Dir: dir, where: map[string]*File{}}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	idx := filepath.Join(dir, IndexFile)
	if data, err := os.ReadFile(idx); err == nil {
		var ix struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(data, &ix); err != nil {
			return nil, fmt.Errorf("safetensors: %s: invalid JSON: %v", idx, err)
		}
		if ix.WeightMap == nil {
			return nil, fmt.Errorf("safetensors: %s: no weight_map", idx)
		}
		files := map[string]*File{}
		names := make([]string, 0, len(ix.WeightMap))
		for n := range ix.WeightMap {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			shard := ix.WeightMap[n]
			if shard == "" || filepath.Base(shard) != shard {
				return nil, fmt.Errorf("safetensors: %s: weight_map[%q] = %q is not a file name in the checkpoint directory", idx, n, shard)
			}
			f, seen := files[shard]
			if !seen {
				p := filepath.Join(dir, shard)
				if _, err := os.Stat(p); err != nil {
					return nil, fmt.Errorf("safetensors: %s: weight_map[%q]: missing shard %s", idx, n, p)
				}
				var err error
				if f, err = Open(p); err != nil {
					return nil, err
				}
				files[shard] = f
				c.Shards = append(c.Shards, f)
			}
			if _, ok := f.Header.Lookup(n); !ok {
				return nil, fmt.Errorf("safetensors: %s: weight_map says %q is in %s, but that shard has no such tensor", idx, n, f.Path)
			}
			c.where[n] = f
		}
	} else if !os.IsNotExist(err) {
		return nil, fmt.Errorf("safetensors: %v", err)
	} else {
		paths := []string{filepath.Join(dir, SingleFile)}
		if _, err := os.Stat(paths[0]); err != nil {
			paths, _ = filepath.Glob(filepath.Join(dir, "*.safetensors"))
		}
		if len(paths) == 0 {
			return nil, fmt.Errorf("safetensors: %s: no %s, %s or *.safetensors file", dir, IndexFile, SingleFile)
		}
		sort.Strings(paths)
		for _, p := range paths {
			f, err := Open(p)
			if err != nil {
				return nil, err
			}
			c.Shards = append(c.Shards, f)
			for _, t := range f.Header.Tensors {
				if g, dup := c.where[t.Name]; dup {
					return nil, fmt.Errorf("safetensors: tensor %q is in both %s and %s", t.Name, g.Path, f.Path)
				}
				c.where[t.Name] = f
			}
		}
	}
	sort.Slice(c.Shards, func(i, j int) bool { return c.Shards[i].Path < c.Shards[j].Path })
	ok = true
	return c, nil
}

// Names lists every tensor of the checkpoint, sorted.
func (c *Checkpoint) Names() []string {
	ns := make([]string, 0, len(c.where))
	for n := range c.where {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// Has reports whether the checkpoint holds name.
func (c *Checkpoint) Has(name string) bool { _, ok := c.where[name]; return ok }

// Info describes tensor name and names the file holding it.
func (c *Checkpoint) Info(name string) (Info, string, error) {
	f, ok := c.where[name]
	if !ok {
		return Info{}, "", fmt.Errorf("safetensors: checkpoint %s: missing tensor %q", c.Dir, name)
	}
	t, _ := f.Header.Lookup(name)
	return t, f.Path, nil
}

// Bytes returns tensor name's raw data (see File.Bytes).
func (c *Checkpoint) Bytes(name string) ([]byte, error) {
	f, ok := c.where[name]
	if !ok {
		return nil, fmt.Errorf("safetensors: checkpoint %s: missing tensor %q", c.Dir, name)
	}
	return f.Bytes(name)
}

// Release tells the OS that bytes [lo, hi) of tensor name's data are not
// needed any more (their mapped pages are dropped from the process; the
// page cache keeps them). A no-op when the file is not mapped.
func (c *Checkpoint) Release(name string, lo, hi int64) {
	if f, ok := c.where[name]; ok {
		f.Release(name, lo, hi)
	}
}

// Close closes every shard.
func (c *Checkpoint) Close() error {
	var first error
	for _, f := range c.Shards {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	c.Shards = nil
	return first
}
