package server

import (
	"context"
	"log/slog"
	"slices"
	"sort"

	"go.uber.org/zap/zapcore"
)

// zapToSlog is a zapcore.Core that forwards the etcd client's warnings and
// errors to the process logger, so they share its format and level
// instead of going to stderr as zap JSON. Below warn the client is chatty
// (every reconnect), so those entries are dropped.
type zapToSlog struct {
	log    *slog.Logger
	fields []zapcore.Field
}

func newZapToSlog(l *slog.Logger) zapcore.Core { return zapToSlog{log: l} }

func (c zapToSlog) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel }

func (c zapToSlog) With(fields []zapcore.Field) zapcore.Core {
	c.fields = append(slices.Clip(c.fields), fields...)
	return c
}

func (c zapToSlog) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c zapToSlog) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := make([]slog.Attr, 0, len(keys))
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	level := slog.LevelWarn
	if e.Level >= zapcore.ErrorLevel {
		level = slog.LevelError
	}
	c.log.LogAttrs(context.Background(), level, e.Message, attrs...)
	return nil
}

func (zapToSlog) Sync() error { return nil }
