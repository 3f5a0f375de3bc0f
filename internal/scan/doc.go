// Package scan finds Python environments, lockfiles and manifests that
// install, lock or admit a release listed in a hazard database: a release
// known to make telemetry arrive twice, such as FastAPI 0.142.0 to 0.142.4,
// which attach a second OTLP exporter to providers that already export.
//
// Scan walks directory trees and reads only files it recognises by name:
// installed distributions (*.dist-info/METADATA under site-packages), uv.lock,
// poetry.lock, requirements and constraints files (and what they include),
// and pyproject.toml. Every other file is neither opened nor stat'ed. The
// trees are untrusted: files are opened through an os.Root, only if they are
// regular, and read with caps (open.go); requirements files are streamed
// as pip reads them (reqfile.go, requirements.go); nothing read is printed
// unescaped (text.go). Each hazard is a PEP 440 specifier over one package; versions are
// compared with github.com/aquasecurity/go-pep440-version behind a small
// wrapper (pep440.go) that corrects the cases that library gets wrong.
package scan
