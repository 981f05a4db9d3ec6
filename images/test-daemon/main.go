// Command test-daemon is the small daemon GenericDaemon tests run on a real node (make images
// builds its image, GD_TEST_IMAGE names it): it prints a line every interval, so that `kubectl
// logs` shows it ran and where, and exits 0 on SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	interval := flag.Duration("interval", 2*time.Second, "how often to print a line")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	host, _ := os.Hostname()
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for n := 1; ; n++ {
		fmt.Printf("test-daemon %s on node %s: alive %d\n", host, os.Getenv("NODE_NAME"), n)
		select {
		case <-ctx.Done():
			fmt.Printf("test-daemon %s: stopping\n", host)
			return
		case <-tick.C:
		}
	}
}
