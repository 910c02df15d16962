// Package watch calls a function when a directory's contents change, debounced.
package watch

import (
	"context"
	"log/slog"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Dir watches dir and calls onChange once per burst of events, debounce after the last one.
// Watching the directory (not its files) also sees Kubernetes ConfigMap updates, which swap a
// `..data` symlink rather than write the files. A slow poll backs up events a watcher can miss.
func Dir(ctx context.Context, dir string, debounce, poll time.Duration, onChange func(), log *slog.Logger) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		return err
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			log.Debug("policy directory event", "event", ev.String())
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			log.Warn("policy directory watch error", "err", err)
		case <-timer.C:
			onChange()
		case <-ticker.C:
			onChange()
		}
	}
}
