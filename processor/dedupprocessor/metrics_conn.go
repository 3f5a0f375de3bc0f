package dedupprocessor

import (
	"context"
	"encoding/binary"
	"hash/maphash"
	"net"

	"go.opentelemetry.io/collector/client"
)

// connOf names the connection a request came on: the sender's address
// that the receiver put in the request's client.Info (the OTLP gRPC
// receiver: the peer's IP and port, one per connection; the HTTP one: its
// IP alone, one for every process of a host), hashed with seed; 0 when
// none is known (a receiver that names no address, or a processor before
// dedup that does not pass the request's context on, such as batch).
// Writers of a metric stream that share one start are told apart by it
// where their connections show themselves each one writer's
// (internal/streams/shared_conn.go); nothing trusts it before.
func connOf(ctx context.Context, seed maphash.Seed) uint64 {
	addr := client.FromContext(ctx).Addr
	if addr == nil {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(seed)
	switch a := addr.(type) {
	case *net.TCPAddr:
		_, _ = h.Write(a.IP.To16())
		var port [2]byte
		binary.LittleEndian.PutUint16(port[:], uint16(a.Port))
		_, _ = h.Write(port[:])
		_, _ = h.WriteString(a.Zone)
	case *net.IPAddr: // the HTTP receiver's: no port
		_, _ = h.Write(a.IP.To16())
		_, _ = h.WriteString(a.Zone)
	default:
		_, _ = h.WriteString(addr.Network())
		_, _ = h.WriteString(addr.String())
	}
	return h.Sum64() | 1
}
