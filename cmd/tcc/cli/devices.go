package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/runtime/blackhole"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/kmd"
	"github.com/tcc-dev/tcc/runtime/blackhole/access/ttsim"
)

// deviceRow is one chip as `tcc devices` prints it.
type deviceRow struct {
	blackhole.Status
	FirmwareState string `json:"firmware"`
}

func newDevicesCmd() *cobra.Command {
	var simPath, format string
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "List Blackhole cards (and the simulated chip) with grid, harvesting and firmware state",
		Long: `List every Blackhole card the tt-kmd driver exposes (/dev/tenstorrent/N) and,
with --ttsim PATH (or TT_METAL_SIMULATOR), every chip ttsim simulates (one
per host-visible chip of the library's configuration: bh_x2 has two): the
architecture from the PCI ids, tcc's worker grid on it, the harvested Tensix
columns, the DRAM banks, the ethernet links between the chips of a multi-chip
library (read from the ethernet cores' boot results), and whether the pinned tt-metal firmware is loaded and
idle on the worker cores (read from each core's reset PC and go signal; the
chip is not changed). It fails when no chip is found.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "table" && format != "json" {
				return fmt.Errorf("--format %q: want table or json", format)
			}
			if simPath == "" {
				simPath = os.Getenv(ttsim.EnvLibrary)
			}
			var rows []deviceRow
			var notes []string
			var links []string
			probe := func(o blackhole.Options) error {
				ds, err := blackhole.OpenAll(o, nil)
				if err != nil {
					return err
				}
				defer func() {
					for _, d := range ds {
						d.Close()
					}
				}()
				for _, d := range ds {
					s, err := d.Status()
					if err != nil {
						return fmt.Errorf("%s chip %d: %w", s.Path, s.Chip, err)
					}
					rows = append(rows, deviceRow{Status: s, FirmwareState: s.Firmware()})
				}
				if len(ds) > 1 {
					ls, err := blackhole.EthLinks(ds)
					if err != nil {
						return fmt.Errorf("%s: ethernet links: %w", o.TTSim, err)
					}
					for _, l := range ls {
						links = append(links, l.String())
					}
				}
				return nil
			}
			nodes, err := kmd.Devices()
			if err != nil {
				notes = append(notes, err.Error())
			}
			for _, n := range nodes {
				if err := probe(blackhole.Options{Backend: "blackhole", Device: n}); err != nil {
					return err
				}
			}
			if simPath != "" {
				if err := probe(blackhole.Options{Backend: "ttsim", TTSim: simPath}); err != nil {
					return err
				}
			} else {
				notes = append(notes, "no simulated chip: pass --ttsim PATH (a libttsim.so) or set "+ttsim.EnvLibrary)
			}
			out := cmd.OutOrStdout()
			if format == "json" {
				b, err := json.MarshalIndent(struct {
					TccVersion string      `json:"tcc_version"`
					Devices    []deviceRow `json:"devices"`
					Links      []string    `json:"ethernet_links,omitempty"`
					Notes      []string    `json:"notes,omitempty"`
				}{codegen.Version, rows, links, notes}, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(out, string(b))
			} else {
				for _, r := range rows {
					harv := "harvesting not read (assumed none)"
					if r.HarvestingRead {
						harv = fmt.Sprintf("harvested columns %v", r.Harvested)
					}
					path := r.Path
					if r.Backend == "ttsim" {
						path = fmt.Sprintf("%s chip %d", r.Path, r.Chip)
					}
					fmt.Fprintf(out, "%s\t%s\t%s\tgrid %dx%d\t%s\tDRAM banks %d\tfirmware %s\n",
						path, r.Backend, r.Arch, r.GridX, r.GridY, harv, r.DRAMBanks, r.FirmwareState)
				}
				if len(links) > 0 {
					fmt.Fprintf(out, "ethernet links between the chips: %s\n", strings.Join(links, ", "))
				}
				for _, n := range notes {
					if len(rows) > 0 { // with no chip the error says it all
						fmt.Fprintf(cmd.ErrOrStderr(), "tcc: %s\n", n)
					}
				}
			}
			if len(rows) == 0 {
				return errors.New("no Blackhole chip found: " + strings.Join(notes, "; "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&simPath, "ttsim", "", "also list the chips this libttsim.so simulates (default $"+ttsim.EnvLibrary+")")
	cmd.Flags().StringVar(&format, "format", "table", "table or json")
	return cmd
}
