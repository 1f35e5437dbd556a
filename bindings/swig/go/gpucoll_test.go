// gpucoll_test.go — the Go package on host slices under mpirun -np 2 (every collective, errors).
package gpucoll

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gpucoll.dev/gpucoll/internal/raw"
)

var comm *Comm

func TestMain(m *testing.M) {
	var err error
	comm, err = NewComm()
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewComm:", err)
		os.Exit(2)
	}
	code := m.Run()
	if err := comm.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "Close:", err)
		code = 1
	}
	Finalize()
	os.Exit(code)
}

// value is what rank r contributes at element i: small integers, exact in every dtype.
func value(r, i int) int { return (r+1)*(i%5+1) + i%3 }

func fill[T Number](n, rank int) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = T(value(rank, i))
	}
	return s
}

func sumOver(size, i int) int {
	t := 0
	for r := 0; r < size; r++ {
		t += value(r, i)
	}
	return t
}

func checkAllReduceSum[T Number](t *testing.T, n int, inPlace bool) {
	t.Helper()
	send := fill[T](n, comm.Rank())
	recv := send
	if !inPlace {
		recv = make([]T, n)
	}
	if err := AllReduce(comm, send, recv, Sum); err != nil {
		t.Fatalf("AllReduce %v: %v", DTypeOf[T](), err)
	}
	for i := range recv {
		if want := T(sumOver(comm.Size(), i)); recv[i] != want {
			t.Fatalf("%v element %d: got %v, want %v", DTypeOf[T](), i, recv[i], want)
		}
	}
}

func TestQueries(t *testing.T) {
	if comm.Size() < 1 || comm.Rank() < 0 || comm.Rank() >= comm.Size() {
		t.Fatalf("rank %d of %d", comm.Rank(), comm.Size())
	}
	if ls, err := comm.LocalSize(); err != nil || ls < 1 {
		t.Fatalf("LocalSize %d, %v", ls, err)
	}
	if Version() == "" || !strings.Contains(ParamsTable(), "GC_TIMEOUT_MS") {
		t.Fatalf("version %q / params table %q", Version(), ParamsTable())
	}
	if Float32.String() != "float32" || Float32.Size() != 4 || Sum.String() != "sum" {
		t.Fatalf("names: %v %d %v", Float32, Float32.Size(), Sum)
	}
	if off, l := Partition(10, 3, 0); off != 0 || l != 4 {
		t.Fatalf("Partition(10, 3, 0) = %d, %d", off, l)
	}
}

func TestAllReduceDTypes(t *testing.T) {
	for _, inPlace := range []bool{false, true} {
		checkAllReduceSum[float32](t, 1000, inPlace)
		checkAllReduceSum[float64](t, 17, inPlace)
		checkAllReduceSum[int32](t, 1, inPlace)
		checkAllReduceSum[int64](t, 257, inPlace)
		checkAllReduceSum[uint8](t, 33, inPlace)
	}
}

func TestAllReduceOps(t *testing.T) {
	n, size := 64, comm.Size()
	for _, op := range []Op{Prod, Min, Max, Avg} {
		send := fill[float64](n, comm.Rank())
		recv := make([]float64, n)
		if err := AllReduce(comm, send, recv, op); err != nil {
			t.Fatalf("%v: %v", op, err)
		}
		for i := range recv {
			want := float64(value(0, i))
			for r := 1; r < size; r++ {
				v := float64(value(r, i))
				switch op {
				case Prod:
					want *= v
				case Min:
					if v < want {
						want = v
					}
				case Max:
					if v > want {
						want = v
					}
				case Avg:
					want += v
				}
			}
			if op == Avg {
				want /= float64(size)
			}
			if d := recv[i] - want; d > 1e-12 || d < -1e-12 {
				t.Fatalf("%v element %d: got %v, want %v", op, i, recv[i], want)
			}
		}
	}
}

func TestAllReduceEpilogue(t *testing.T) {
	n := 40
	send := fill[float32](n, comm.Rank())
	add := make([]float32, n)
	for i := range add {
		add[i] = float32(i)
	}
	recv := make([]float32, n)
	if err := AllReduce(comm, send, recv, Sum, WithScale(0.5), WithAddSlice(add)); err != nil {
		t.Fatal(err)
	}
	for i := range recv {
		if want := float32(sumOver(comm.Size(), i))*0.5 + float32(i); recv[i] != want {
			t.Fatalf("element %d: got %v, want %v", i, recv[i], want)
		}
	}
	if err := AllReduce(comm, send, recv, Sum, WithAddSlice(add[:3])); err == nil {
		t.Fatal("a short add slice was accepted")
	}
	// An empty add slice is no add: refused where elements are expected, not dropped.
	if err := AllReduce(comm, send, recv, Sum, WithAddSlice(add[:0])); err == nil {
		t.Fatal("an empty add slice was accepted")
	}
	// The add vector has the input dtype: the library would read n float32 from n bytes.
	var e *Error
	err := AllReduce(comm, send, recv, Sum, WithAddSlice(make([]uint8, n)))
	if !errors.As(err, &e) || e.Code != "GC_ERR_INVALID_ARGUMENT" || !strings.Contains(e.Message, "uint8") {
		t.Fatalf("a uint8 add slice for float32 data: got %v", err)
	}
	if err := AllReduce(comm, send, recv, Sum, WithAddSlice(make([]float64, n))); err == nil {
		t.Fatal("a float64 add slice for float32 data was accepted")
	}
}

// Over a compressed wire: powers of two, the same on every rank, travel exactly in fp8 and bf16;
// another dtype or collective is refused with the library's message.
func TestAllReduceWire(t *testing.T) {
	n := 300
	send := make([]float32, n)
	for i := range send {
		send[i] = float32(int(1) << (i % 4))
	}
	for _, w := range []struct {
		wire  Wire
		group int
	}{{WireFP8, 0}, {WireFP8, 64}, {WireBF16, 0}, {WireNative, 0}} {
		recv := make([]float32, n)
		if err := AllReduce(comm, send, recv, Sum, WithWire(w.wire, w.group)); err != nil {
			t.Fatalf("wire %v: %v", w.wire, err)
		}
		for i := range recv {
			if want := float32(comm.Size() * (1 << (i % 4))); recv[i] != want {
				t.Fatalf("wire %v element %d: got %v, want %v", w.wire, i, recv[i], want)
			}
		}
	}
	if WireFP8.String() != "fp8" {
		t.Fatalf("WireFP8 is %q", WireFP8.String())
	}
	var e *Error
	err := AllReduce(comm, make([]int32, n), make([]int32, n), Sum, WithWire(WireFP8, 0))
	if !errors.As(err, &e) || e.Code != "GC_ERR_INVALID_ARGUMENT" || !strings.Contains(e.Message, "fp8 wire takes") {
		t.Fatalf("fp8 wire on int32: got %v", err)
	}
	err = AllReduce(comm, send, make([]float32, n), Sum, WithWire(WireFP8, 48))
	if !errors.As(err, &e) || !strings.Contains(e.Message, "use 32, 64 or 128") {
		t.Fatalf("fp8 wire group 48: got %v", err)
	}
}

func TestReduceScatter(t *testing.T) {
	size, rank, n := comm.Size(), comm.Rank(), 37
	send := fill[float32](n*size, rank)
	recv := make([]float32, n)
	if err := ReduceScatter(comm, send, recv, Sum); err != nil {
		t.Fatal(err)
	}
	for i := range recv {
		if want := float32(sumOver(size, rank*n+i)); recv[i] != want {
			t.Fatalf("element %d: got %v, want %v", i, recv[i], want)
		}
	}
}

func TestReduceScatter2D(t *testing.T) {
	size, rank := comm.Size(), comm.Rank()
	rows, cols := 5, 7 // uneven over 2 ranks on both axes
	send := fill[int64](rows*cols, rank)
	for axis := 0; axis < 2; axis++ {
		var recv []int64
		var off, l int
		if axis == 0 {
			off, l = Partition(rows, size, rank)
			recv = make([]int64, l*cols)
		} else {
			off, l = Partition(cols, size, rank)
			recv = make([]int64, rows*l)
		}
		if err := ReduceScatter2D(comm, send, recv, rows, cols, axis, Sum); err != nil {
			t.Fatalf("axis %d: %v", axis, err)
		}
		for k := range recv {
			var i int
			if axis == 0 {
				i = (off+k/cols)*cols + k%cols
			} else {
				i = (k/l)*cols + off + k%l
			}
			if want := int64(sumOver(size, i)); recv[k] != want {
				t.Fatalf("axis %d element %d: got %v, want %v", axis, k, recv[k], want)
			}
		}
	}
}

func TestAllGather(t *testing.T) {
	size, n := comm.Size(), 11
	send := fill[int32](n, comm.Rank())
	recv := make([]int32, n*size)
	if err := AllGather(comm, send, recv); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < size; r++ {
		for i := 0; i < n; i++ {
			if got, want := recv[r*n+i], int32(value(r, i)); got != want {
				t.Fatalf("rank %d element %d: got %v, want %v", r, i, got, want)
			}
		}
	}
}

// nodeSizes are the node sizes the mixed operations run with: 1, 2 (when that makes several
// nodes) and every rank.
func nodeSizes(size int) []int {
	ls := []int{1}
	if size%2 == 0 && size > 2 {
		ls = append(ls, 2)
	}
	if size > 1 {
		ls = append(ls, size)
	}
	return ls
}

// mixedRef is the sum of value(r, i) over the ranks r with r % step == first, divided by div
// for Avg.
func mixedRef(op Op, first, step, size, i int) float64 {
	s := 0.0
	for r := first; r < size; r += step {
		s += float64(value(r, i))
	}
	if op == Avg {
		s /= float64(size / step)
	}
	return s
}

func TestMixed(t *testing.T) {
	size, rank, n := comm.Size(), comm.Rank(), 13
	for _, l := range nodeSizes(size) {
		c, err := NewCommConfig(&Config{LocalSize: l})
		if err != nil {
			t.Fatalf("local size %d: %v", l, err)
		}
		if ls, err := c.LocalSize(); err != nil || ls != l || c.LocalRank() != rank%l {
			t.Fatalf("local size %d: got local size %d (%v), local rank %d", l, ls, err, c.LocalRank())
		}
		lr := c.LocalRank()
		for _, op := range []Op{Sum, Avg} {
			// reducescatter_allreduce: block lr reduced over every rank (Avg: / size)
			send := fill[float64](l*n, rank)
			recv := make([]float64, n)
			if err := ReduceScatterAllReduce(c, send, recv, op); err != nil {
				t.Fatalf("local size %d %v: %v", l, op, err)
			}
			for j := range recv {
				if want := mixedRef(op, 0, 1, size, lr*n+j); recv[j] != want {
					t.Fatalf("ReduceScatterAllReduce local size %d %v element %d: got %v, want %v", l, op, j, recv[j], want)
				}
			}
			// allreduce_allgather: block k reduced over the ranks of local rank k (Avg: / nodes)
			gathered := make([]float64, l*n)
			if err := AllReduceAllGather(c, fill[float64](n, rank), gathered, op); err != nil {
				t.Fatalf("local size %d %v: %v", l, op, err)
			}
			for k := range gathered {
				if want := mixedRef(op, k/n, l, size, k%n); gathered[k] != want {
					t.Fatalf("AllReduceAllGather local size %d %v element %d: got %v, want %v", l, op, k, gathered[k], want)
				}
			}
		}
		// in place, with the epilogue (an add of recvcount / sendcount elements)
		add := make([]float32, n)
		for j := range add {
			add[j] = float32(j%7-3) / 4
		}
		buf := fill[float32](l*n, rank)
		block := buf[lr*n : (lr+1)*n]
		if err := ReduceScatterAllReduce(c, buf, block, Sum, WithScale(0.5), WithAddSlice(add)); err != nil {
			t.Fatalf("local size %d in place: %v", l, err)
		}
		for j := range block {
			if want := float32(mixedRef(Sum, 0, 1, size, lr*n+j))*0.5 + add[j]; block[j] != want {
				t.Fatalf("ReduceScatterAllReduce in place, local size %d element %d: got %v, want %v", l, j, block[j], want)
			}
		}
		out := make([]float32, l*n)
		copy(out[lr*n:], fill[float32](n, rank))
		if err := AllReduceAllGather(c, out[lr*n:(lr+1)*n], out, Sum, WithScale(0.5), WithAddSlice(add)); err != nil {
			t.Fatalf("local size %d in place: %v", l, err)
		}
		for k := range out {
			if want := float32(mixedRef(Sum, k/n, l, size, k%n))*0.5 + add[k%n]; out[k] != want {
				t.Fatalf("AllReduceAllGather in place, local size %d element %d: got %v, want %v", l, k, out[k], want)
			}
		}
		// errors: lengths (the add holds sendcount, not the output's count), a cast the library refuses
		if err := AllReduceAllGather(c, out[:n], make([]float32, l*n+1), Sum); err == nil {
			t.Fatalf("local size %d: a recv of the wrong length was accepted", l)
		}
		if err := ReduceScatterAllReduce(c, buf, make([]float32, n+1), Sum); err == nil {
			t.Fatalf("local size %d: a send of the wrong length was accepted", l)
		}
		if l > 1 {
			long := make([]float32, l*n)
			if err := AllReduceAllGather(c, fill[float32](n, rank), out, Sum, WithAddSlice(long)); err == nil {
				t.Fatalf("local size %d: an add of recv's length was accepted", l)
			}
		}
		var e *Error
		err = AllReduceAllGather(c, fill[float32](n, rank), make([]float32, l*n), Sum, WithOutDType(Int32))
		if !errors.As(err, &e) || e.Code != "GC_ERR_INVALID_ARGUMENT" || !strings.Contains(e.Message, "gc_allreduce_allgather") {
			t.Fatalf("local size %d: a cast to int32: got %v", l, err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("local size %d: Close: %v", l, err)
		}
	}
}

func TestBroadcast(t *testing.T) {
	n := 100
	for _, root := range []int{0, comm.Size() - 1} {
		buf := fill[float64](n, comm.Rank())
		if err := Broadcast(comm, buf, buf, root); err != nil { // in place
			t.Fatalf("root %d: %v", root, err)
		}
		recv := make([]uint8, n)
		var send []uint8
		if comm.Rank() == root {
			send = fill[uint8](n, root)
		}
		if err := Broadcast(comm, send, recv, root); err != nil {
			t.Fatalf("root %d: %v", root, err)
		}
		for i := 0; i < n; i++ {
			if buf[i] != float64(value(root, i)) || recv[i] != uint8(value(root, i)) {
				t.Fatalf("root %d element %d: got %v / %v", root, i, buf[i], recv[i])
			}
		}
	}
}

func TestErrors(t *testing.T) {
	buf := make([]float32, 8)
	// Every rank passes the same bad root, so every rank fails alike in the library.
	err := Broadcast(comm, buf, buf, comm.Size()+3)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("bad root: got %v, want *gpucoll.Error", err)
	}
	if e.Code != "GC_ERR_INVALID_ARGUMENT" || e.Value != 1 || !strings.Contains(e.Message, "gc_broadcast") {
		t.Fatalf("bad root: code %q value %d message %q", e.Code, e.Value, e.Message)
	}
	if err := AllReduce(comm, buf, buf[:4], Sum); err == nil {
		t.Fatal("mismatched lengths were accepted")
	}
	// Partial overlap of send and recv is refused by the library.
	err = AllReduce(comm, buf[:6], buf[1:7], Sum)
	if !errors.As(err, &e) || e.Code != "GC_ERR_INVALID_ARGUMENT" {
		t.Fatalf("overlap: got %v", err)
	}
	closed := &Comm{}
	if err := AllReduce(closed, buf, buf, Sum); !errors.As(err, &e) || e.Code != "GC_ERR_INVALID_USAGE" {
		t.Fatalf("closed comm: got %v", err)
	}
}

// A failing call without a communicator, after calls that took one but return no result code
// (AlgoTable, gc_comm_last_error), reports its own message. The OS thread is locked so that every
// call runs on one thread, where a stale record of the communicator would be found.
func TestErrorWithoutCommIsItsOwn(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]float32, 8)
	if err := Broadcast(comm, buf, buf, comm.Size()+3); err == nil { // leaves a message in comm's slot
		t.Fatal("a bad root was accepted")
	}
	if comm.AlgoTable() == "" {
		t.Fatal("empty algo table")
	}
	var e *Error
	err := raw.Gc_op_from_name("xor", []int32{0})
	if !errors.As(err, &e) || !strings.Contains(e.Message, "gc_op_from_name: GC_ERR_INVALID_ARGUMENT: unknown op 'xor'") {
		t.Fatalf("bad op name: got %v", err)
	}
	raw.Gc_comm_last_error(comm.h)
	cfg := raw.NewGc_config_t()
	defer raw.DeleteGc_config_t(cfg)
	cfg.SetVersion(0) // refused before any communication, alike on every rank
	err = raw.Gc_comm_init_f([]uintptr{0}, raw.Gcswig_world(), cfg)
	if !errors.As(err, &e) || !strings.Contains(e.Message, "gc_comm_init_f: GC_ERR_INVALID_ARGUMENT: gc_config_t.version is 0") {
		t.Fatalf("config version 0: got %v", err)
	}
}

// A failed destroy carries the library's message, not only the code's sentence.
func TestDestroyErrorMessage(t *testing.T) {
	c, err := NewComm()
	if err != nil {
		t.Fatal(err)
	}
	h := c.h
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var e *Error
	err = raw.Gc_comm_destroy(h) // not live any more: refused, nothing freed twice
	if !errors.As(err, &e) || e.Code != "GC_ERR_INVALID_USAGE" || !strings.Contains(e.Message, "not a live communicator") {
		t.Fatalf("second destroy: got %v", err)
	}
}

func TestAutoTuneSaveLoad(t *testing.T) {
	if err := comm.AutoTune(16*1024, Float32); err != nil {
		t.Fatalf("AutoTune: %v", err)
	}
	tuned := comm.AlgoTable()
	if !strings.Contains(tuned, "tuned") {
		t.Fatalf("no tuned rows in %q", tuned)
	}
	// The same path on every rank: rank 0 writes it, rank 0 reads it back.
	path := filepath.Join(os.TempDir(), fmt.Sprintf("gpucoll-go-test-%d.tune", comm.Size()))
	if err := comm.SaveTuning(path); err != nil {
		t.Fatalf("SaveTuning: %v", err)
	}
	if err := comm.LoadTuning(path); err != nil {
		t.Fatalf("LoadTuning: %v", err)
	}
	if got := comm.AlgoTable(); got != tuned {
		t.Fatalf("table after load %q, want %q", got, tuned)
	}
	if err := comm.LoadTuning("/nonexistent-dir/x.tune"); err == nil {
		t.Fatalf("LoadTuning of a missing file succeeded")
	}
}

// Every failing result code has its sentinel, and a library failure matches its own only.
func TestSentinels(t *testing.T) {
	sentinels := []Result{ErrInvalidArgument, ErrInvalidUsage, ErrUnsupported, ErrCUDA, ErrMPI,
		ErrSystem, ErrTimeout, ErrRemote, ErrInternal, ErrStreamTimeout}
	if len(sentinels) != int(raw.GC_NUM_RESULTS)-1 {
		t.Fatalf("%d sentinels for %d failing result codes", len(sentinels), int(raw.GC_NUM_RESULTS)-1)
	}
	for i, s := range sentinels {
		if int(s) != i+1 || s.Error() != raw.Gc_result_name(i+1) {
			t.Fatalf("sentinel %d is %d (%q), want %d (%q)", i, int(s), s.Error(), i+1, raw.Gc_result_name(i+1))
		}
	}
	buf := make([]float32, 8)
	err := Broadcast(comm, buf, buf, comm.Size()+3)
	if !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrTimeout) {
		t.Fatalf("bad root: %v does not match ErrInvalidArgument alone", err)
	}
	if got := fmt.Sprintf("%T", err); got != "*gpucoll.Error" {
		t.Fatalf("bad root: error type %s, want *gpucoll.Error", got)
	}
	if err := raw.Gc_op_from_name("xor", []int32{0}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("gc_op_from_name(xor): %v, want ErrInvalidArgument", err)
	}
}
