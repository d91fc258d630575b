package broker

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The reaper takes the cost of freeing deleted log segments off the broker's
// request loop.
//
// kfake serves every request from one goroutine, and that goroutine also
// deletes the segment files that retention expires. Unlinking a 100 MiB
// segment costs the kernel ~30 ms of freeing its blocks and page cache
// (measured on this project's box: p50 30 ms, max 40 ms, writing 90 MB/s),
// and one retention pass expires every partition's old segments at once: at
// 30,000 copies/s of 3000 B that is 0.6–0.8 s in which nothing is produced or
// fetched, every 30 s (BENCHMARKS.md, the soak).
//
// The reaper holds an open descriptor to every segment file. kfake's unlink
// then only removes the name; the inode and its blocks are freed when the last
// descriptor closes, which the reaper does on its own goroutine once it sees
// the file has no name left. Deleted data stays on disk at most reapEvery
// longer.
type reaper struct {
	dir  string // the data dir's partitions folder
	log  *slog.Logger
	held map[string]*os.File // segment path -> descriptor
	full bool                // maxHeld reached (logged once)
}

const (
	reapEvery = time.Second
	// maxHeld bounds the descriptors: 5 minutes at 90 MB/s in 100 MiB
	// segments is ~300. Past it, new segments are left to kfake's own
	// unlink, as without the reaper.
	maxHeld = 8192
)

func newReaper(dataDir string, log *slog.Logger) *reaper {
	return &reaper{dir: filepath.Join(dataDir, "partitions"), log: log, held: make(map[string]*os.File)}
}

// run reaps every reapEvery until stop closes, then lets go of every
// descriptor.
func (r *reaper) run(stop <-chan struct{}) {
	t := time.NewTicker(reapEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			r.closeAll()
			return
		case <-t.C:
			r.reap()
		}
	}
}

// reap closes the descriptors of deleted segments first (so a segment
// created again under a deleted one's name is held afresh), then opens the
// segments not yet held.
func (r *reaper) reap() {
	for path, f := range r.held {
		if linked(f) {
			continue
		}
		start := time.Now()
		_ = f.Close() // frees the deleted segment's blocks
		delete(r.held, path)
		if d := time.Since(start); d > 100*time.Millisecond {
			r.log.Debug("freed a deleted segment", "path", path, "took", d)
		}
	}
	parts, err := os.ReadDir(r.dir)
	if err != nil {
		return // no partition yet
	}
	for _, p := range parts {
		if !p.IsDir() {
			continue
		}
		dir := filepath.Join(r.dir, p.Name())
		files, err := os.ReadDir(dir)
		if err != nil {
			continue // a topic being deleted
		}
		for _, e := range files {
			if !strings.HasSuffix(e.Name(), ".dat") {
				continue
			}
			path := filepath.Join(dir, e.Name())
			if _, ok := r.held[path]; ok {
				continue
			}
			if len(r.held) >= maxHeld {
				if !r.full {
					r.full = true
					r.log.Warn("broker: holding the most segment files it will; more are freed by the broker's loop",
						"held", len(r.held))
				}
				return
			}
			f, err := os.Open(path)
			if err != nil {
				continue // deleted since the listing
			}
			r.held[path] = f
		}
	}
}

func (r *reaper) closeAll() {
	for path, f := range r.held {
		_ = f.Close()
		delete(r.held, path)
	}
}
