package ir

import "fmt"

// ExtractRegion returns a standalone graph computing region r of g, and
// the map from g's values to the new graph's. The region's ops are cloned
// (g is not modified); inputs, weights and states r reads are declared
// again with their kind and name; results of earlier regions r reads
// become inputs named "<region label> in %ID"; the outputs are the results
// of r that later regions read or g outputs; the state updates are those r
// computes. Value and op IDs are kept, so messages match g's. The result
// verifies when g does.
func ExtractRegion(g *Graph, r *Region) (*Graph, map[*Value]*Value, error) {
	found := false
	for _, x := range g.Regions {
		found = found || x == r
	}
	if !found {
		return nil, nil, fmt.Errorf("ir: ExtractRegion: region %s is not in graph %q", r.Label(), g.Name)
	}
	out := &Graph{Name: fmt.Sprintf("%s.%s", g.Name, r.Label()), Mesh: g.Mesh, StateUpdates: map[*Value]*Value{}, nextID: g.nextID}
	m := map[*Value]*Value{}
	declare := func(v *Value) *Value {
		if d, ok := m[v]; ok {
			return d
		}
		d := &Value{ID: v.ID, Name: v.Name, Kind: v.Kind, Type: v.Type}
		switch v.Kind {
		case KindWeight:
			out.Weights = append(out.Weights, d)
		case KindState:
			out.States = append(out.States, d)
		case KindInput:
			out.Inputs = append(out.Inputs, d)
		default:
			d.Kind, d.Name = KindInput, fmt.Sprintf("%s in %s", r.Label(), v)
			out.Inputs = append(out.Inputs, d)
		}
		m[v] = d
		return d
	}
	region := &Region{Kind: r.Kind, Index: r.Index}
	for _, op := range r.Ops {
		c := &Op{ID: op.ID, Kind: op.Kind, Attrs: op.Attrs, Region: region, Decomp: op.Decomp, Rule: op.Rule}
		for _, v := range op.Operands {
			c.Operands = append(c.Operands, declare(v))
		}
		for _, res := range op.Results {
			nr := &Value{ID: res.ID, Name: res.Name, Kind: KindResult, Type: res.Type, Def: c}
			c.Results = append(c.Results, nr)
			m[res] = nr
		}
		region.Ops = append(region.Ops, c)
	}
	out.Regions = []*Region{region}
	readLater := map[*Value]bool{}
	after := false
	for _, x := range g.Regions {
		if x == r {
			after = true
			continue
		}
		if after {
			for _, op := range x.Ops {
				for _, v := range op.Operands {
					readLater[v] = true
				}
			}
		}
	}
	for _, v := range g.Outputs {
		readLater[v] = true
	}
	for _, op := range r.Ops {
		for _, res := range op.Results {
			if readLater[res] {
				out.Outputs = append(out.Outputs, m[res])
			}
		}
	}
	for _, s := range g.States {
		nv, ok := g.StateUpdates[s]
		if !ok {
			continue
		}
		if def := nv.Def; def != nil && def.Region == r {
			out.StateUpdates[declare(s)] = m[nv]
		}
	}
	return out, m, nil
}
