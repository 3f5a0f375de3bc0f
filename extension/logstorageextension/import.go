package logstorageextension

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Import writes kv as the data of a new client at dir (ClientDir), which
// must not exist: into dir.importing first, synced, then renamed to dir,
// so that a crash leaves either no client at dir or the whole data.
// Moving a file_storage file's data to log_storage is Import, then
// moving the file aside: a crash between the two finds dir there and only
// moves the file.
func Import(dir string, kv map[string][]byte, segmentBytes int64) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("log_storage: importing into %s: it exists", dir)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	tmp := dir + ".importing"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if segmentBytes <= 0 {
		segmentBytes = DefaultSegmentBytes
	}
	c, err := openClient(tmp, options{fsync: true, segmentBytes: segmentBytes})
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var ops []*storage.Operation
	size := 0
	for i, k := range keys {
		ops = append(ops, storage.SetOperation(k, kv[k]))
		size += len(k) + len(kv[k])
		if size >= int(segmentBytes/2) || i == len(keys)-1 {
			if err := c.Batch(context.Background(), ops...); err != nil {
				c.Close(context.Background())
				return err
			}
			ops, size = ops[:0], 0
		}
	}
	if err := c.Close(context.Background()); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(dir))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
