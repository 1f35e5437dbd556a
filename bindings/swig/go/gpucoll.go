// Package gpucoll runs gpucoll's multi-GPU collectives (NCCL-like, over MPI) from Go.
//
// It wraps internal/raw, which the go tool generates with SWIG from gpucoll.i; cgo finds
// gpucoll.i, gpucoll.h, libgpucoll and MPI through `pkg-config gpucoll` (set PKG_CONFIG_PATH to
// the install's lib/pkgconfig). Host buffers are typed slices; device buffers and CUDA streams are
// uintptr. A failed call returns a *gpucoll.Error (Code "GC_ERR_...", Message with the library's
// detailed message) that matches its result's sentinel with errors.Is:
//
//	if errors.Is(err, gpucoll.ErrTimeout) { ... }
//
//	comm, err := gpucoll.NewComm() // MPI_COMM_WORLD; starts MPI if no one has
//	defer gpucoll.Finalize()
//	defer comm.Close()
//	err = gpucoll.AllReduce(comm, send, recv, gpucoll.Sum)
package gpucoll

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"gpucoll.dev/gpucoll/internal/raw"
)

// Error is a failed gpucoll call: Code is the result name ("GC_ERR_TIMEOUT"), Value its number,
// Message the function, the code and the library's detailed message. It unwraps to its Result,
// so errors.Is(err, gpucoll.ErrInvalidArgument) holds for an invalid argument.
type Error struct {
	Value   int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Unwrap gives the sentinel of the error's result code.
func (e *Error) Unwrap() error { return Result(e.Value) }

// Result is a gpucoll result code (gc_result_t); each failing one is a sentinel error below.
type Result int

func (r Result) Error() string { return raw.Gc_result_name(int(r)) }

// The sentinels, one per failing gc_result_t, for errors.Is.
var (
	ErrInvalidArgument = Result(raw.GC_ERR_INVALID_ARGUMENT)
	ErrInvalidUsage    = Result(raw.GC_ERR_INVALID_USAGE)
	ErrUnsupported     = Result(raw.GC_ERR_UNSUPPORTED)
	ErrCUDA            = Result(raw.GC_ERR_CUDA)
	ErrMPI             = Result(raw.GC_ERR_MPI)
	ErrSystem          = Result(raw.GC_ERR_SYSTEM)
	ErrTimeout         = Result(raw.GC_ERR_TIMEOUT)
	ErrRemote          = Result(raw.GC_ERR_REMOTE)
	ErrInternal        = Result(raw.GC_ERR_INTERNAL)
	ErrStreamTimeout   = Result(raw.GC_ERR_STREAM_TIMEOUT)
)

// Every raw call's failure becomes an *Error.
func init() { raw.NewError = newError }

// DType is an element type of the collectives.
type DType int32

// The element types (gc_dtype_t). FP8 types are outputs (WithOutDType) and gather/broadcast only.
var (
	Float32  = DType(raw.GC_FLOAT32)
	Float16  = DType(raw.GC_FLOAT16)
	BFloat16 = DType(raw.GC_BFLOAT16)
	Float64  = DType(raw.GC_FLOAT64)
	Int32    = DType(raw.GC_INT32)
	Int64    = DType(raw.GC_INT64)
	Uint8    = DType(raw.GC_UINT8)
	FP8E4M3  = DType(raw.GC_FP8_E4M3)
	FP8E5M2  = DType(raw.GC_FP8_E5M2)
)

func (d DType) String() string { return raw.Gc_dtype_name(raw.Enum_SS_gc_dtype(d)) }

// Size is the number of bytes of one element.
func (d DType) Size() int { return int(raw.Gc_dtype_size(raw.Enum_SS_gc_dtype(d))) }

// Op is a reduction operator.
type Op int32

// The reduction operators (gc_op_t). Avg is Sum scaled by 1/size.
var (
	Sum  = Op(raw.GC_SUM)
	Prod = Op(raw.GC_PROD)
	Min  = Op(raw.GC_MIN)
	Max  = Op(raw.GC_MAX)
	Avg  = Op(raw.GC_AVG)
)

func (o Op) String() string { return raw.Gc_op_name(raw.Enum_SS_gc_op(o)) }

// Algo is a collective algorithm; AlgoAuto lets the dispatch table choose.
type Algo int32

// The algorithms (gc_algo_t).
var (
	AlgoAuto        = Algo(raw.GC_ALGO_AUTO)
	AlgoOneShot     = Algo(raw.GC_ALGO_ONESHOT)
	AlgoTwoShot     = Algo(raw.GC_ALGO_TWOSHOT)
	AlgoWrites = Algo(raw.GC_ALGO_WRITES)
	AlgoMPI         = Algo(raw.GC_ALGO_MPI)
	AlgoMultimem    = Algo(raw.GC_ALGO_MULTIMEM)
	AlgoCopyEngine  = Algo(raw.GC_ALGO_COPYENGINE)
	AlgoOneShotLL   = Algo(raw.GC_ALGO_ONESHOT_LL)
)

func (a Algo) String() string { return raw.Gc_algo_name(raw.Enum_SS_gc_algo(a)) }

// Wire is what AllReduce moves between ranks (gc_wire_t): WireNative, the input dtype (the
// default); WireFP8, e4m3 codes with a power-of-two scale per group of elements (float32,
// float16, bfloat16 data); WireBF16, bfloat16 (float32 data). The compressed wires take Sum and
// Avg, give every rank the same bits, within the bound of docs/wire-format.md.
type Wire int32

// The wire formats (gc_wire_t).
var (
	WireNative = Wire(raw.GC_WIRE_NATIVE)
	WireFP8    = Wire(raw.GC_WIRE_FP8)
	WireBF16   = Wire(raw.GC_WIRE_BF16)
)

func (w Wire) String() string { return raw.Gc_wire_name(raw.Enum_SS_gc_wire(w)) }

// Version is the library's version, "0.1.0".
func Version() string { return raw.Gc_get_version() }

// ParamsTable lists every environment knob with the value in force, one row a line.
func ParamsTable() string { return raw.Gc_params_table() }

// Partition says how total items split over parts parts: the offset and length of part index.
func Partition(total, parts, index int) (offset, length int) {
	o, l := []uint64{0}, []uint64{0}
	raw.Gc_partition(int64(total), parts, index, o, l)
	return int(o[0]), int(l[0])
}

// Finalize finishes MPI if this package started it (close every Comm first).
func Finalize() { raw.Gcswig_finalize() }

// newError is an *Error of result value with the full message text.
func newError(value int, message string) error {
	return &Error{Value: value, Code: raw.Gc_result_name(value), Message: message}
}

// callError is an *Error of result value worded like the library's: "function: GC_ERR_X: detail".
func callError(value int, function, detail string) error {
	return newError(value, function+": "+raw.Gc_result_name(value)+": "+detail)
}

func invalid(function, format string, args ...interface{}) error {
	return callError(int(raw.GC_ERR_INVALID_ARGUMENT), function, fmt.Sprintf(format, args...))
}

// ---- communicator ---------------------------------------------------------------------------

// Config holds the fields of gc_config_t; the zero value of every field means the default.
type Config struct {
	Device       int  // CUDA device; 0 is taken literally only with DeviceSet
	DeviceSet    bool // use Device instead of local rank modulo the device count
	HostOnly     bool // MPI path for everything even when GPUs are present
	LocalSize    int  // ranks per node (0 = GC_LOCAL_SIZE or MPI)
	StagingBytes int  // per-rank staging area (0 = GC_STAGING_BYTES)
	TimeoutMS    int  // bound on every device-side wait (0 = GC_TIMEOUT_MS)
}

// Comm is a gpucoll communicator. Not safe for concurrent use.
type Comm struct {
	h                             uintptr
	rank, size, localRank, device int
}

// NewComm makes a communicator over MPI_COMM_WORLD (collective), starting MPI if needed.
func NewComm() (*Comm, error) { return NewCommConfig(nil) }

// NewCommConfig is NewComm with a configuration.
func NewCommConfig(cfg *Config) (*Comm, error) {
	fint := raw.Gcswig_world()
	if fint == -1 {
		return nil, newError(int(raw.GC_ERR_MPI), "NewComm: MPI_Init_thread failed")
	}
	return NewCommFortran(fint, cfg)
}

// NewCommFortran makes a communicator over the MPI communicator with Fortran handle fint
// (MPI_Comm_c2f), for programs that run MPI themselves. Collective over that communicator.
func NewCommFortran(fint int, cfg *Config) (*Comm, error) {
	c := raw.NewGc_config_t()
	defer raw.DeleteGc_config_t(c)
	if cfg != nil {
		if cfg.DeviceSet {
			c.SetDevice(cfg.Device)
		}
		if cfg.HostOnly {
			c.SetUse_gpu(0)
		}
		c.SetLocal_size(cfg.LocalSize)
		c.SetStaging_bytes(int64(cfg.StagingBytes))
		c.SetTimeout_ms(cfg.TimeoutMS)
	}
	h := []uintptr{0}
	if err := raw.Gc_comm_init_f(h, fint, c); err != nil {
		return nil, err
	}
	comm := &Comm{h: h[0]}
	v := []int32{0}
	for _, q := range []struct {
		f   func(uintptr, []int32) error
		dst *int
	}{{raw.Gc_comm_rank, &comm.rank}, {raw.Gc_comm_size, &comm.size},
		{raw.Gc_comm_local_rank, &comm.localRank}, {raw.Gc_comm_device, &comm.device}} {
		if err := q.f(comm.h, v); err != nil {
			raw.Gc_comm_destroy(comm.h)
			return nil, err
		}
		*q.dst = int(v[0])
	}
	return comm, nil
}

func (c *Comm) handle(function string) (uintptr, error) {
	if c == nil || c.h == 0 {
		return 0, callError(int(raw.GC_ERR_INVALID_USAGE), function, "the communicator is closed")
	}
	return c.h, nil
}

// Close destroys the communicator (collective). Closing twice does nothing. An *Error with Code
// "GC_ERR_STREAM_TIMEOUT" (a device's work did not finish) leaves it open, nothing freed: close
// again on every rank once that work ends.
func (c *Comm) Close() error {
	if c == nil || c.h == 0 {
		return nil
	}
	err := raw.Gc_comm_destroy(c.h)
	if !errors.Is(err, ErrStreamTimeout) {
		c.h = 0
	}
	return err
}

// Rank is this rank in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.size }

// LocalRank is the rank among the ranks of this node.
func (c *Comm) LocalRank() int { return c.localRank }

// Device is the CUDA device of this rank, -1 on a host-only rank.
func (c *Comm) Device() int { return c.device }

func (c *Comm) queryInt(function string, f func(uintptr, []int32) error) (int, error) {
	h, err := c.handle(function)
	if err != nil {
		return 0, err
	}
	v := []int32{0}
	if err := f(h, v); err != nil {
		return 0, err
	}
	return int(v[0]), nil
}

// LocalSize is the number of ranks on this node.
func (c *Comm) LocalSize() (int, error) { return c.queryInt("LocalSize", raw.Gc_comm_local_size) }

// NodeCount is the number of nodes.
func (c *Comm) NodeCount() (int, error) { return c.queryInt("NodeCount", raw.Gc_comm_node_count) }

// CUDAAwareMPI says whether MPI takes device pointers itself.
func (c *Comm) CUDAAwareMPI() (bool, error) {
	v, err := c.queryInt("CUDAAwareMPI", raw.Gc_comm_cuda_aware_mpi)
	return v != 0, err
}

// P2PReady says whether every local GPU reaches every other (the peer-to-peer kernels run).
func (c *Comm) P2PReady() (bool, error) {
	v, err := c.queryInt("P2PReady", raw.Gc_comm_p2p_ready)
	return v != 0, err
}

// PeerAccess says whether this rank's GPU reads and writes the GPU of local rank peer.
func (c *Comm) PeerAccess(peer int) (bool, error) {
	v, err := c.queryInt("PeerAccess", func(h uintptr, v []int32) error {
		return raw.Gc_comm_peer_access(h, peer, v)
	})
	return v != 0, err
}

// Stream is the communicator's own CUDA stream (0 on host-only ranks).
func (c *Comm) Stream() (uintptr, error) {
	h, err := c.handle("Stream")
	if err != nil {
		return 0, err
	}
	v := []uintptr{0}
	if err := raw.Gc_comm_stream(h, v); err != nil {
		return 0, err
	}
	return v[0], nil
}

// AlgoTable is the dispatch table in force, one row a line.
func (c *Comm) AlgoTable() string {
	if c == nil || c.h == 0 {
		return ""
	}
	return raw.Gc_comm_algo_table(c.h)
}

// Synchronize waits for stream and reports any error a kernel recorded.
func (c *Comm) Synchronize(stream uintptr) error {
	h, err := c.handle("Synchronize")
	if err != nil {
		return err
	}
	return raw.Gc_synchronize(h, stream)
}

// AutoTune times every algorithm per collective at sizes up to maxBytes and makes the fastest
// this communicator's choice (collective; rank 0's measurement is broadcast).
func (c *Comm) AutoTune(maxBytes uint64, dtype DType) error {
	h, err := c.handle("AutoTune")
	if err != nil {
		return err
	}
	return raw.Gc_autotune(h, int64(maxBytes), raw.Enum_SS_gc_dtype(dtype))
}

// SaveTuning writes the tuned rows to path (rank 0 writes; collective).
func (c *Comm) SaveTuning(path string) error {
	h, err := c.handle("SaveTuning")
	if err != nil {
		return err
	}
	return raw.Gc_tune_save(h, path)
}

// LoadTuning reads rows saved by SaveTuning (rank 0 reads and broadcasts; collective).
func (c *Comm) LoadTuning(path string) error {
	h, err := c.handle("LoadTuning")
	if err != nil {
		return err
	}
	return raw.Gc_tune_load(h, path)
}

// ---- options --------------------------------------------------------------------------------

// Option changes one field of a collective's gc_options_t.
type Option func(*options)

type options struct {
	algo      Algo
	maxBlocks int
	pdl       bool
	scale     float64
	add       uintptr
	addLen    int           // elements of a host add slice; -1 for a device pointer
	addDType  DType         // the host add slice's element type (when addSlice)
	addSlice  bool          // WithAddSlice was given (an empty slice too: its address is 0)
	outDType  DType         // DType(raw.GC_DTYPE_SAME) unless WithOutDType
	wire      Wire          // WithWire: the all-reduce's wire format
	wireGroup int           // WithWire: fp8's elements per scale (0 = 32)
	keep      []interface{} // host slices that must stay alive during the call
}

// WithAlgo forces an algorithm.
func WithAlgo(a Algo) Option { return func(o *options) { o.algo = a } }

// WithMaxBlocks caps the grid.
func WithMaxBlocks(n int) Option { return func(o *options) { o.maxBlocks = n } }

// WithPDL turns on programmatic dependent launch (without it, GC_PDL decides: on by default for
// GPUs of compute capability 9.0 and up).
func WithPDL() Option { return func(o *options) { o.pdl = true } }

// WithScale multiplies every output element (the epilogue's scale).
func WithScale(s float64) Option { return func(o *options) { o.scale = s } }

// WithAdd adds a device vector (input dtype, one element per output element) to the output.
func WithAdd(ptr uintptr) Option {
	return func(o *options) { o.add, o.addLen, o.addSlice = ptr, -1, false }
}

// WithAddSlice adds a host vector (one element per output element) to the output.
func WithAddSlice[T Number](add []T) Option {
	return func(o *options) {
		o.add, o.addLen, o.addDType, o.addSlice = ptrOf(add), len(add), DTypeOf[T](), true
		o.keep = append(o.keep, add)
	}
}

// WithWire moves the all-reduce's data over the wire format w; group is fp8's elements per scale
// (32, 64 or 128; 0 = 32) and 0 for the others. Only AllReduce takes a wire other than WireNative.
func WithWire(w Wire, group int) Option { return func(o *options) { o.wire, o.wireGroup = w, group } }

// WithOutDType casts the output to d (recv then holds d; send and recv must not overlap).
func WithOutDType(d DType) Option { return func(o *options) { o.outDType = d } }

func buildOptions(opts []Option) (*options, raw.Gc_options_t) {
	o := &options{algo: AlgoAuto, scale: 1, outDType: DType(raw.GC_DTYPE_SAME)}
	for _, f := range opts {
		f(o)
	}
	if len(opts) == 0 {
		return o, nil
	}
	r := raw.NewGc_options_t()
	r.SetAlgo(raw.Enum_SS_gc_algo(o.algo))
	r.SetMax_blocks(o.maxBlocks)
	if o.pdl {
		r.SetPdl(1)
	}
	r.SetScale(o.scale)
	r.SetAdd(o.add)
	r.SetOut_dtype(raw.Enum_SS_gc_dtype(o.outDType))
	r.SetWire(raw.Enum_SS_gc_wire(o.wire))
	r.SetWire_group(o.wireGroup)
	return o, r
}

// withOptions runs call with the raw options (nil = defaults) and frees them afterwards. A host
// add slice must hold addWant elements of the input dtype dt: the library reads that many.
func withOptions(opts []Option, addWant int, dt DType, function string,
	call func(raw.Gc_options_t) error) error {
	o, r := buildOptions(opts)
	if r != nil {
		defer raw.DeleteGc_options_t(r)
	}
	if o.addSlice && o.addDType != dt {
		return invalid(function, "the add slice holds %v, the input is %v", o.addDType, dt)
	}
	if o.addSlice && o.addLen != addWant {
		return invalid(function, "the add slice has %d elements, expected %d", o.addLen, addWant)
	}
	err := call(r)
	runtime.KeepAlive(o.keep)
	return err
}

// ---- collectives on device pointers ----------------------------------------------------------

// AllReducePtr all-reduces count elements from send into recv (device or host pointers) on stream.
func (c *Comm) AllReducePtr(send, recv uintptr, count int, dt DType, op Op, stream uintptr,
	opts ...Option) error {
	h, err := c.handle("AllReduce")
	if err != nil {
		return err
	}
	return withOptions(opts, count, dt, "AllReduce", func(r raw.Gc_options_t) error {
		return raw.Gc_allreduce_ex(send, recv, int64(count), raw.Enum_SS_gc_dtype(dt),
			raw.Enum_SS_gc_op(op), h, stream, r)
	})
}

// ReduceScatterPtr reduces size*recvcount elements of send; this rank gets its recvcount slice.
func (c *Comm) ReduceScatterPtr(send, recv uintptr, recvcount int, dt DType, op Op,
	stream uintptr, opts ...Option) error {
	h, err := c.handle("ReduceScatter")
	if err != nil {
		return err
	}
	return withOptions(opts, recvcount, dt, "ReduceScatter", func(r raw.Gc_options_t) error {
		return raw.Gc_reducescatter_ex(send, recv, int64(recvcount), raw.Enum_SS_gc_dtype(dt),
			raw.Enum_SS_gc_op(op), h, stream, r)
	})
}

// ReduceScatter2DPtr reduce-scatters a rows x cols matrix by rows (axis 0) or columns (axis 1).
func (c *Comm) ReduceScatter2DPtr(send, recv uintptr, rows, cols, axis int, dt DType, op Op,
	stream uintptr, opts ...Option) error {
	h, err := c.handle("ReduceScatter2D")
	if err != nil {
		return err
	}
	want := c.rs2dCount(rows, cols, axis)
	return withOptions(opts, want, dt, "ReduceScatter2D", func(r raw.Gc_options_t) error {
		return raw.Gc_reducescatter_2d(send, recv, int64(rows), int64(cols), axis,
			raw.Enum_SS_gc_dtype(dt), raw.Enum_SS_gc_op(op), h, stream, r)
	})
}

// rs2dCount is the number of elements this rank gets from a rows x cols reduce-scatter along
// axis: its block of rows (axis 0) or of columns (any other axis).
func (c *Comm) rs2dCount(rows, cols, axis int) int {
	if axis == 0 {
		_, l := Partition(rows, c.size, c.rank)
		return l * cols
	}
	_, l := Partition(cols, c.size, c.rank)
	return rows * l
}

// AllGatherPtr gathers sendcount elements from every rank into recv, in rank order.
func (c *Comm) AllGatherPtr(send, recv uintptr, sendcount int, dt DType, stream uintptr,
	opts ...Option) error {
	h, err := c.handle("AllGather")
	if err != nil {
		return err
	}
	return withOptions(opts, sendcount*c.size, dt, "AllGather", func(r raw.Gc_options_t) error {
		return raw.Gc_allgather_ex(send, recv, int64(sendcount), raw.Enum_SS_gc_dtype(dt), h,
			stream, r)
	})
}

// BroadcastPtr copies count elements of root's send into every rank's recv.
func (c *Comm) BroadcastPtr(send, recv uintptr, count int, dt DType, root int, stream uintptr,
	opts ...Option) error {
	h, err := c.handle("Broadcast")
	if err != nil {
		return err
	}
	return withOptions(opts, count, dt, "Broadcast", func(r raw.Gc_options_t) error {
		return raw.Gc_broadcast_ex(send, recv, int64(count), raw.Enum_SS_gc_dtype(dt), root, h,
			stream, r)
	})
}

// ReduceScatterAllReducePtr is the mixed tensor/data-parallel reduce-scatter: send holds
// LocalSize()*recvcount elements; recv gets block LocalRank() of them reduced over every rank
// (inside the node, then across nodes; Avg divides by Size()). The add option holds recvcount
// elements. In place when recv is send's block LocalRank().
func (c *Comm) ReduceScatterAllReducePtr(send, recv uintptr, recvcount int, dt DType, op Op,
	stream uintptr, opts ...Option) error {
	h, err := c.handle("ReduceScatterAllReduce")
	if err != nil {
		return err
	}
	return withOptions(opts, recvcount, dt, "ReduceScatterAllReduce", func(r raw.Gc_options_t) error {
		return raw.Gc_reducescatter_allreduce(send, recv, int64(recvcount), raw.Enum_SS_gc_dtype(dt),
			raw.Enum_SS_gc_op(op), h, stream, r)
	})
}

// AllReduceAllGatherPtr is the mixed tensor/data-parallel all-gather: send (sendcount elements)
// is reduced over the ranks of this local rank on every node (Avg divides by the node count; the
// add option holds sendcount elements), and recv (LocalSize()*sendcount) gets the node's results
// in local-rank order. In place when send is recv's block LocalRank().
func (c *Comm) AllReduceAllGatherPtr(send, recv uintptr, sendcount int, dt DType, op Op,
	stream uintptr, opts ...Option) error {
	h, err := c.handle("AllReduceAllGather")
	if err != nil {
		return err
	}
	return withOptions(opts, sendcount, dt, "AllReduceAllGather", func(r raw.Gc_options_t) error {
		return raw.Gc_allreduce_allgather(send, recv, int64(sendcount), raw.Enum_SS_gc_dtype(dt),
			raw.Enum_SS_gc_op(op), h, stream, r)
	})
}

// ---- collectives on host slices ---------------------------------------------------------------

// Number is an element type that host slices may hold.
type Number interface {
	float32 | float64 | int32 | int64 | uint8
}

// DTypeOf is the DType of T.
func DTypeOf[T Number]() DType {
	var z T
	switch any(z).(type) {
	case float32:
		return Float32
	case float64:
		return Float64
	case int32:
		return Int32
	case int64:
		return Int64
	default:
		return Uint8
	}
}

// ptrOf is the address of s's first element (0 for an empty slice). The callers keep s alive
// with runtime.KeepAlive until the C call returns (host pointers complete before it returns),
// and passing s to KeepAlive also moves it to the heap, which Go never moves.
func ptrOf[T Number](s []T) uintptr {
	if len(s) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&s[0]))
}

// AllReduce reduces send over all ranks into recv (len(recv) == len(send); the same slice for
// in place).
func AllReduce[T Number](c *Comm, send, recv []T, op Op, opts ...Option) error {
	if len(recv) != len(send) {
		return invalid("AllReduce", "recv has %d elements, send %d", len(recv), len(send))
	}
	err := c.AllReducePtr(ptrOf(send), ptrOf(recv), len(send), DTypeOf[T](), op, 0, opts...)
	runtime.KeepAlive(send)
	runtime.KeepAlive(recv)
	return err
}

// ReduceScatter reduces send (size * len(recv) elements) and leaves this rank's slice in recv.
func ReduceScatter[T Number](c *Comm, send, recv []T, op Op, opts ...Option) error {
	if c != nil && len(send) != c.size*len(recv) {
		return invalid("ReduceScatter", "send has %d elements, not %d ranks x %d", len(send),
			c.size, len(recv))
	}
	err := c.ReduceScatterPtr(ptrOf(send), ptrOf(recv), len(recv), DTypeOf[T](), op, 0, opts...)
	runtime.KeepAlive(send)
	runtime.KeepAlive(recv)
	return err
}

// ReduceScatter2D reduce-scatters the row-major rows x cols matrix send: axis 0 leaves this
// rank's block of rows in recv (block x cols), axis 1 its block of columns (rows x block).
func ReduceScatter2D[T Number](c *Comm, send, recv []T, rows, cols, axis int, op Op,
	opts ...Option) error {
	if len(send) != rows*cols {
		return invalid("ReduceScatter2D", "send has %d elements, not %d x %d", len(send), rows, cols)
	}
	if c != nil && (axis == 0 || axis == 1) {
		if want := c.rs2dCount(rows, cols, axis); len(recv) != want {
			return invalid("ReduceScatter2D", "recv has %d elements, this rank's block %d",
				len(recv), want)
		}
	}
	err := c.ReduceScatter2DPtr(ptrOf(send), ptrOf(recv), rows, cols, axis, DTypeOf[T](), op, 0,
		opts...)
	runtime.KeepAlive(send)
	runtime.KeepAlive(recv)
	return err
}

// AllGather concatenates every rank's send into recv (size * len(send) elements, rank order).
func AllGather[T Number](c *Comm, send, recv []T, opts ...Option) error {
	if c != nil && len(recv) != c.size*len(send) {
		return invalid("AllGather", "recv has %d elements, not %d ranks x %d", len(recv), c.size,
			len(send))
	}
	err := c.AllGatherPtr(ptrOf(send), ptrOf(recv), len(send), DTypeOf[T](), 0, opts...)
	runtime.KeepAlive(send)
	runtime.KeepAlive(recv)
	return err
}

// ReduceScatterAllReduce reduces send (LocalSize() * len(recv) elements) over every rank and
// leaves block LocalRank() in recv (see ReduceScatterAllReducePtr).
func ReduceScatterAllReduce[T Number](c *Comm, send, recv []T, op Op, opts ...Option) error {
	if l, err := c.LocalSize(); err != nil {
		return err
	} else if len(send) != l*len(recv) {
		return invalid("ReduceScatterAllReduce", "send has %d elements, not %d local ranks x %d",
			len(send), l, len(recv))
	}
	err := c.ReduceScatterAllReducePtr(ptrOf(send), ptrOf(recv), len(recv), DTypeOf[T](), op, 0,
		opts...)
	runtime.KeepAlive(send)
	runtime.KeepAlive(recv)
	return err
}

// AllReduceAllGather reduces send over the ranks of this local rank and gathers the node's
// results into recv (LocalSize() * len(send) elements; see AllReduceAllGatherPtr).
func AllReduceAllGather[T Number](c *Comm, send, recv []T, op Op, opts ...Option) error {
	if l, err := c.LocalSize(); err != nil {
		return err
	} else if len(recv) != l*len(send) {
		return invalid("AllReduceAllGather", "recv has %d elements, not %d local ranks x %d",
			len(recv), l, len(send))
	}
	err := c.AllReduceAllGatherPtr(ptrOf(send), ptrOf(recv), len(send), DTypeOf[T](), op, 0,
		opts...)
	runtime.KeepAlive(send)
	runtime.KeepAlive(recv)
	return err
}

// Broadcast copies root's send into every rank's recv (len(recv) elements); send is read on
// root only (nil elsewhere is fine) and may be recv itself.
func Broadcast[T Number](c *Comm, send, recv []T, root int, opts ...Option) error {
	if c != nil && c.rank == root && len(send) != len(recv) {
		return invalid("Broadcast", "send has %d elements, recv %d", len(send), len(recv))
	}
	err := c.BroadcastPtr(ptrOf(send), ptrOf(recv), len(recv), DTypeOf[T](), root, 0, opts...)
	runtime.KeepAlive(send)
	runtime.KeepAlive(recv)
	return err
}
