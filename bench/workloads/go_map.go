// A Go service's cache for the judge bench: a map of 10 M integer keys to pointers to small
// records (about 1 GiB in all), read by two goroutines with random lookups among the first 1 %
// of the keys (narrow) or among all of them (wide). Reads allocate nothing; the runtime's own
// threads (GC workers, the scavenger) run beside them.
//
// usage: go_map SECONDS
//
//	prints "ready" once the map is filled, then reads until SECONDS have passed; a line "wide"
//	(or "narrow") on stdin switches the share read.
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const keys = 10_000_000

type record struct {
	id, twice int64
	payload   [32]byte
}

func main() {
	secs, _ := strconv.Atoi(os.Args[1])
	end := time.Now().Add(time.Duration(secs) * time.Second)
	m := make(map[int64]*record, keys)
	for i := int64(0); i < keys; i++ {
		m[i] = &record{id: i, twice: 2 * i}
	}
	runtime.GC()
	var share atomic.Int64
	share.Store(keys / 100)
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			if strings.TrimSpace(in.Text()) == "wide" {
				share.Store(keys)
			} else {
				share.Store(keys / 100)
			}
		}
	}()
	var wg sync.WaitGroup
	var sink atomic.Int64
	for t := uint64(1); t <= 2; t++ {
		wg.Add(1)
		go func(x uint64) {
			defer wg.Done()
			var sum int64
			for time.Now().Before(end) {
				for i := 0; i < 100_000; i++ {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					sum += m[int64(x%uint64(share.Load()))].twice
				}
			}
			sink.Add(sum)
		}(0x9E3779B97F4A7C15 * t)
	}
	// Once the readers' threads exist: a monitor that attaches on "ready" finds them all.
	time.Sleep(time.Second)
	fmt.Println("ready")
	wg.Wait()
}
