package access

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestVMActivityCredentialsAreTheVMsOwn(t *testing.T) {
	key := bytes.Repeat([]byte{7}, KeyBytes)
	a1, err := VMActivityCredentials(key, "uid-a")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := VMActivityCredentials(key, "uid-a")
	if a1.Token != again.Token || !bytes.Equal(a1.PEM, again.PEM) {
		t.Error("the same VM got other credentials at another render")
	}
	b, _ := VMActivityCredentials(key, "uid-b")
	other, _ := VMActivityCredentials(bytes.Repeat([]byte{8}, KeyBytes), "uid-a")
	for name, c := range map[string]VMActivity{"another VM": b, "another operator key": other} {
		if c.Token == a1.Token || c.Public.Equal(a1.Public) {
			t.Errorf("%s shares the token or the key", name)
		}
	}
	if len(a1.Token) != 32 || strings.ContainsAny(a1.Token, "+/=") {
		t.Errorf("token %q: want 32 URL-safe characters", a1.Token)
	}
}

// TestVMActivityTLSIsPinned: the operator's client completes a handshake with the launcher
// holding the VM's PEM, and refuses one holding another VM's.
func TestVMActivityTLSIsPinned(t *testing.T) {
	key := bytes.Repeat([]byte{7}, KeyBytes)
	vm, _ := VMActivityCredentials(key, "uid-a")
	impostor, _ := VMActivityCredentials(key, "uid-b")
	for _, tc := range []struct {
		name   string
		served VMActivity
		ok     bool
	}{{"the VM's own launcher", vm, true}, {"another VM's launcher", impostor, false}} {
		t.Run(tc.name, func(t *testing.T) {
			cert, err := tls.X509KeyPair(tc.served.PEM, tc.served.PEM)
			if err != nil {
				t.Fatalf("the PEM does not load as a key pair: %v", err)
			}
			ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err == nil {
					_, _ = c.Write([]byte("hello"))
					_ = c.Close()
				}
			}()
			conn, err := tls.Dial("tcp", ln.Addr().String(), vm.ClientTLS())
			if err == nil {
				_, err = io.ReadAll(conn)
				conn.Close()
			}
			if (err == nil) != tc.ok {
				t.Errorf("handshake error %v; want success %v", err, tc.ok)
			}
		})
	}
}

// TestVMActivityCredentialsNeverChange: a VM's credentials are rendered into its cloud-init
// Secret, so an operator whose derivation gave other bytes for the same key and VM would rewrite
// every VM's Secret on upgrade. These are the bytes every version has given.
func TestVMActivityCredentialsNeverChange(t *testing.T) {
	c, err := VMActivityCredentials(bytes.Repeat([]byte{7}, KeyBytes), "uid-a")
	if err != nil {
		t.Fatal(err)
	}
	const want = "4e840a90483e4d4ed3fda41da13af53b95ddb45d608d70d72bcb413bbcda6c31"
	if got := fmt.Sprintf("%x", sha256.Sum256(c.PEM)); got != want {
		t.Errorf("the PEM's SHA-256 is %s, was %s", got, want)
	}
}
