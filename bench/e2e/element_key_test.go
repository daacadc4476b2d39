package e2e

import (
	"bytes"
	"testing"
)

func TestServiceIPsKey(t *testing.T) {
	for _, tc := range []struct {
		ip    string
		proto uint8
		port  uint16
		want  []byte
	}{
		{"10.96.0.1", ProtoTCP, 80, []byte{10, 96, 0, 1, 6, 0, 0, 0, 0, 80, 0, 0}},
		{"::ffff:10.96.0.1", ProtoUDP, 53, []byte{10, 96, 0, 1, 17, 0, 0, 0, 0, 53, 0, 0}},
		{"fd00:96::5", ProtoTCP, 8443, []byte{0xfd, 0, 0, 0x96, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 6, 0, 0, 0, 0x20, 0xfb, 0, 0}},
	} {
		got, err := ServiceIPsKey(tc.ip, tc.proto, tc.port)
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("ServiceIPsKey(%s, %d, %d) = %v, %v; want %v", tc.ip, tc.proto, tc.port, got, err, tc.want)
		}
	}
	if _, err := ServiceIPsKey("not an address", ProtoTCP, 80); err == nil {
		t.Error("a malformed address gave a key")
	}
}
