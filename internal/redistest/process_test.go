package redistest

import (
	"errors"
	"net"
	"strings"
	"testing"
)

func TestLaunchQuotesOutputOnFailure(t *testing.T) {
	bin := requireBinary(t)
	ports, err := freePorts(1, false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = launch(spec{bin: bin, port: ports[0], dir: t.TempDir(), data: true,
		args: []string{"--no-such-directive", "x"}})
	if err == nil {
		t.Fatal("launch with a bad option succeeded, want an error")
	}
	if !strings.Contains(err.Error(), "no-such-directive") {
		t.Errorf("error %q does not quote the server's complaint", err)
	}
}

func TestLaunchReportsPortInUse(t *testing.T) {
	bin := requireBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = launch(spec{bin: bin, port: port, dir: t.TempDir(), data: true})
	if !errors.Is(err, errPortInUse) {
		t.Fatalf("launch on a taken port: got %v, want errPortInUse", err)
	}
}
