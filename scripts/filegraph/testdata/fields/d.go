package fields

import "net/http"

// The imports are not loaded: a key of an imported type's literal cannot
// be told from a.go's constant Addr, and counts.
var srv = http.Server{Addr: ":0"}
