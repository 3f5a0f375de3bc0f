package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/doubletake/doubletake/internal/datadir"
	"github.com/doubletake/doubletake/internal/distro"
	"github.com/doubletake/doubletake/processor/dedupprocessor"
)

// newCheckStorageCommand is the child that checks one storage file
// (datadir.CheckCommand): bbolt may fault on a damaged file (SIGBUS,
// SIGSEGV), which no Go code can recover from, so log_storage, moving a
// file_storage directory into its clients at Start, checks each file in a
// process of its own and takes a crash as damage.
func newCheckStorageCommand() *cobra.Command {
	return &cobra.Command{
		Use:    datadir.CheckCommand + " FILE",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := datadir.CheckFile(args[0], dedupprocessor.SalvageJournal); err != nil {
				return &ExitError{Code: ExitFindings, Err: err}
			}
			return nil
		},
	}
}

// prepareDataDir takes the data dir for this run and, in local mode,
// opens the files the exporters will write. The lock is held while the
// returned file is open: the caller closes it once the collector has
// stopped (or at once on an error). The storage under the data dir is
// log_storage's to check, salvage and move from file_storage at its
// Start, as it does for any config: the embedded default names
// {DataDir}/queue as its file_storage_directory.
func prepareDataDir(o distro.Options) (lock *os.File, err error) {
	lock, err = datadir.Lock(o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	defer func() {
		if err != nil {
			_ = lock.Close()
			lock = nil
		}
	}()
	if o.Upstream == "" {
		for _, name := range []string{"traces.jsonl", "logs.jsonl"} {
			if err := datadir.CheckWritable(filepath.Join(o.DataDir, name)); err != nil {
				return nil, fmt.Errorf("run: %w", err)
			}
		}
	}
	return lock, nil
}
