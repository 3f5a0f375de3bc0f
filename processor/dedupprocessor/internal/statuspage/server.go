package statuspage

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"
)

// Refresh is the page's meta refresh.
const Refresh = 5 * time.Second

//go:embed status.html
var statusHTML string

// Server serves one processor's status page from its snapshot function.
type Server struct {
	cfg  Config
	set  component.TelemetrySettings
	snap Snapshot
	tmpl *template.Template

	srv  *http.Server
	addr net.Addr
	done chan struct{}
}

// New makes the page's server; nil when the page is off.
func New(cfg Config, set component.TelemetrySettings, snap Snapshot) (*Server, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	tmpl, err := template.New("status").Funcs(template.FuncMap{
		"pct":   func(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" },
		"secs":  func(f float64) string { return (time.Duration(f * float64(time.Second))).Round(time.Second).String() },
		"deref": func(f *float64) float64 { return *f },
		"when": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
		"whenp": func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05.000Z")
		},
		"refresh":   func() int { return int(Refresh / time.Second) },
		"breakable": breakable,
		"copying":   func(ss []ServiceStatus) []ServiceStatus { return servicesBy(ss, true) },
		"quiet":     func(ss []ServiceStatus) []ServiceStatus { return servicesBy(ss, false) },
	}).Parse(statusHTML)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, set: set, snap: snap, tmpl: tmpl}, nil
}

// Start listens and serves; a nil server (the page off) does nothing.
func (s *Server) Start(ctx context.Context, host component.Host) error {
	if s == nil {
		return nil
	}
	ln, err := s.cfg.HTTP.ToListener(ctx)
	if err != nil {
		return fmt.Errorf("status::http::endpoint %q: %w", s.cfg.HTTP.NetAddr.Endpoint, err)
	}
	srv, err := s.cfg.HTTP.ToServer(ctx, host.GetExtensions(), s.set, s.Handler())
	if err != nil {
		ln.Close()
		return fmt.Errorf("status: %w", err)
	}
	s.srv, s.addr, s.done = srv, ln.Addr(), make(chan struct{})
	go func() {
		defer close(s.done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.set.Logger.Error("status page server", zap.Error(err))
		}
	}()
	s.set.Logger.Info("status page", zap.String("endpoint", ln.Addr().String()))
	return nil
}

// Addr is the address the page is served on; "" while it is not.
func (s *Server) Addr() string {
	if s == nil || s.srv == nil {
		return ""
	}
	return s.addr.String()
}

// Stop ends serving; a nil or stopped server does nothing.
func (s *Server) Stop() {
	if s == nil || s.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done
	s.srv = nil
}

// Status is what the page shows now.
func (s *Server) Status(now time.Time) Status {
	st := s.snap(now)
	st.Generated = now.UTC()
	st.bound(s.cfg.MaxRows)
	// An empty table is [] in the JSON, never null.
	st.Services = nonNil(st.Services)
	st.Streams = nonNil(st.Streams)
	st.Nested = nonNil(st.Nested)
	st.Windows = nonNil(st.Windows)
	st.Queues = nonNil(st.Queues)
	return st
}

// nonNil is l, or an empty slice for a nil one.
func nonNil[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

// Handler serves the page at / and its data at /status.json.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		st := s.Status(time.Now())
		var b strings.Builder
		if err := s.tmpl.Execute(&b, st); err != nil {
			http.Error(w, "rendering the status page: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write([]byte(b.String()))
	})
	mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s.Status(time.Now()))
	})
	return mux
}

// servicesBy keeps the services that sent copies (or, with false, those
// that sent none): the page lists them in separate tables.
func servicesBy(ss []ServiceStatus, copies bool) []ServiceStatus {
	var out []ServiceStatus
	for _, s := range ss {
		if (s.Copies > 0) == copies {
			out = append(out, s)
		}
	}
	return out
}

// breakable is name escaped, with a break opportunity after each '_' and
// '.', so the page wraps names between their words, not inside them.
func breakable(name string) template.HTML {
	var b strings.Builder
	for _, r := range name {
		b.WriteString(template.HTMLEscapeString(string(r)))
		if r == '_' || r == '.' {
			b.WriteString("<wbr>")
		}
	}
	return template.HTML(b.String()) //nolint:gosec // escaped above
}
