// Command allreduce all-reduces float32 host slices with gpucoll from Go, checks and times them.
//
// Run it under MPI: mpirun -np 2 ./gpucoll-allreduce -count 1000000 -iters 20
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"gpucoll.dev/gpucoll"
)

func main() {
	count := flag.Int("count", 1<<20, "elements per rank")
	iters := flag.Int("iters", 10, "timed iterations")
	flag.Parse()

	comm, err := gpucoll.NewComm()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpucoll-allreduce:", err)
		os.Exit(1)
	}
	rank, size := comm.Rank(), comm.Size()

	send := make([]float32, *count)
	for i := range send {
		send[i] = float32(rank + 1)
	}
	recv := make([]float32, *count)
	if err := gpucoll.AllReduce(comm, send, recv, gpucoll.Sum); err != nil {
		fmt.Fprintln(os.Stderr, "gpucoll-allreduce:", err)
		os.Exit(1)
	}
	want := float32(size * (size + 1) / 2)
	status := 0
	for i, v := range recv {
		if v != want {
			fmt.Fprintf(os.Stderr, "rank %d: element %d is %v, want %v\n", rank, i, v, want)
			status = 1
			break
		}
	}

	start := time.Now()
	for i := 0; i < *iters && status == 0; i++ {
		if err := gpucoll.AllReduce(comm, send, recv, gpucoll.Sum); err != nil {
			fmt.Fprintln(os.Stderr, "gpucoll-allreduce:", err)
			status = 1
		}
	}
	if rank == 0 && status == 0 && *iters > 0 {
		us := float64(time.Since(start).Microseconds()) / float64(*iters)
		fmt.Printf("gpucoll %s: all-reduce of %d float32 over %d ranks (host slices): %.1f us, "+
			"%.3f GB/s algbw, result checked\n", gpucoll.Version(), *count, size, us,
			float64(*count*4)/us/1e3)
	}
	if err := comm.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "gpucoll-allreduce:", err)
		status = 1
	}
	gpucoll.Finalize()
	os.Exit(status)
}
