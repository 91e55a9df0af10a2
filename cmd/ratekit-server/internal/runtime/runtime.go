// Package runtime finds, reads and watches the configuration files as
// envoyproxy/ratelimit's file provider does: every file under
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY, subdirectories
// included, dot files too unless told otherwise. A change (a file written,
// created or removed, or RUNTIME_ROOT swapped to another directory by a
// symlink) reloads every file within a second or two; a set that does not
// load is refused and the last good configuration stays.
package runtime

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
)

// Source says where the files are.
type Source struct {
	Root, Subdirectory, AppDirectory string
	IgnoreDotFiles                   bool
}

// Dir is the directory whose files are loaded.
func (s Source) Dir() string { return filepath.Join(s.Root, s.Subdirectory, s.AppDirectory) }

// maxFiles bounds the files of one configuration.
const maxFiles = 10_000

// Read returns every file of the source, sorted by path. A missing
// directory is no files.
func (s Source) Read() ([]config.File, error) {
	dir := s.Dir()
	var files []config.File
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if s.IgnoreDotFiles && path != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if len(files) >= maxFiles {
			return fmt.Errorf("more than %d files under %s", maxFiles, dir)
		}
		data, err := readFile(path)
		if errors.Is(err, errIsDir) {
			return nil
		}
		if err != nil {
			return err
		}
		files = append(files, config.File{Name: path, Data: data})
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, err
}

// errIsDir reports a directory reached through a symlink, which is
// skipped, as envoy skips it.
var errIsDir = errors.New("a directory")

// readFile reads the file at path, through a symlink as envoy reads
// through one. It opens the file once and asks the opened file what it
// is: anything but a regular file (a FIFO, whose reads would wait for a
// writer forever; a device such as /dev/zero, which never ends) is
// refused without reading, and a regular file is read up to
// config.MaxFileSize and a byte, however large it has grown since.
func readFile(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
	// writer; it changes nothing for a regular file
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch {
	case info.IsDir():
		return nil, errIsDir
	case !info.Mode().IsRegular():
		return nil, &config.Error{File: path, Msg: fmt.Sprintf("not a regular file (%s): refused unread", kind(info.Mode()))}
	case info.Size() > config.MaxFileSize:
		return nil, tooLarge(path, info.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, config.MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > config.MaxFileSize {
		return nil, tooLarge(path, int64(len(data)))
	}
	return data, nil
}

// kind names a file mode that is not a regular file's.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.Type().String()
}

func tooLarge(path string, size int64) error {
	return &config.Error{File: path, Msg: fmt.Sprintf("file of %d bytes or more is larger than %d", size, config.MaxFileSize)}
}

// Watcher reloads the configuration when its files change, and hands each
// configuration that loads to its callback. Its goroutines run until
// Close.
type Watcher struct {
	src    Source
	opts   config.Options
	apply  func(*config.Config, []config.Warning, error)
	fsw    *fsnotify.Watcher
	poke   chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	last   [32]byte
}

// PollEvery is how often the watcher also compares the files' contents,
// in case a change sent no event (a symlink swapped above the watched
// directories, a network file system).
const PollEvery = time.Second

// settle is how long the watcher waits after an event for more, so that
// a change of several files loads once.
const settle = 100 * time.Millisecond

// Watch loads the configuration once, hands it to apply, and then again
// after each change of the files, until Close. apply receives the error
// of a set that did not load (the caller keeps its last good
// configuration); it is called from one goroutine at a time.
func Watch(src Source, opts config.Options, apply func(*config.Config, []config.Warning, error)) (*Watcher, error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("runtime: watching %s: %w", src.Dir(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{src: src, opts: opts, apply: apply, fsw: fsw, poke: make(chan struct{}, 1), cancel: cancel}
	w.addWatches()
	w.reload(true)
	w.wg.Add(2)
	go w.events(ctx)
	go w.loop(ctx)
	return w, nil
}

// addWatches watches the directory, its subdirectories and the parents up
// to RUNTIME_ROOT's, where a symlink swap shows.
func (w *Watcher) addWatches() {
	dir := w.src.Dir()
	for d := dir; ; d = filepath.Dir(d) {
		_ = w.fsw.Add(d)
		if d == filepath.Dir(w.src.Root) || d == filepath.Dir(d) {
			break
		}
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = w.fsw.Add(p)
		}
		return nil
	})
}

func (w *Watcher) events(ctx context.Context) {
	defer w.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			select {
			case w.poke <- struct{}{}:
			default:
			}
		case _, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
		}
	}
}

func (w *Watcher) loop(ctx context.Context) {
	defer w.wg.Done()
	tick := time.NewTicker(PollEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.poke:
			t := time.NewTimer(settle)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			w.addWatches()
			w.reload(false)
		case <-tick.C:
			w.reload(false)
		}
	}
}

// reload reads the files and, when they changed (or always, the first
// time), loads them and hands the result to apply.
func (w *Watcher) reload(first bool) {
	files, err := w.src.Read()
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%d:%s\x00%d:", len(f.Name), f.Name, len(f.Data))
		h.Write(f.Data)
	}
	if err != nil {
		fmt.Fprintf(h, "error:%v", err)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	w.mu.Lock()
	same := sum == w.last
	w.last = sum
	w.mu.Unlock()
	if same && !first {
		return
	}
	if err != nil {
		w.apply(nil, nil, err)
		return
	}
	cfg, warns, err := config.Load(files, w.opts)
	w.apply(cfg, warns, err)
}

// Close stops watching and waits for the goroutines.
func (w *Watcher) Close() error {
	w.cancel()
	err := w.fsw.Close()
	w.wg.Wait()
	return err
}
