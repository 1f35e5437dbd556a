# smoke.tcl — the Tcl module under mpirun -np 2: real all-reduce, all-gather, broadcast and an error.
# Usage: mpirun -np 2 tclsh smoke.tcl /path/to/gpucoll.so
load [lindex $argv 0] Gpucoll

set comm [gpucoll::gc_comm_init_f [gpucoll::gcswig_world] NULL]
set rank [gpucoll::gc_comm_rank $comm]
set size [gpucoll::gc_comm_size $comm]

# A failed check aborts every rank, so the peers never wait in a collective that will not come.
proc fail {msg} {
  global comm rank
  puts stderr "rank $rank: FAIL: $msg"
  gpucoll::gc_comm_abort $comm 1
  exit 1
}
proc addr {a} { return [gpucoll::gcswig_addr_double $a] }

# All-reduce (sum) of n doubles; rank r contributes (r + 1) * (i + 1).
set n 1000
set send [gpucoll::new_doubleArray $n]
set recv [gpucoll::new_doubleArray $n]
for {set i 0} {$i < $n} {incr i} {
  gpucoll::doubleArray_setitem $send $i [expr {($rank + 1) * ($i + 1)}]
}
gpucoll::gc_allreduce [addr $send] [addr $recv] $n $gpucoll::GC_FLOAT64 $gpucoll::GC_SUM $comm 0
set ranksum [expr {$size * ($size + 1) / 2}]
for {set i 0} {$i < $n} {incr i} {
  set got [gpucoll::doubleArray_getitem $recv $i]
  if {$got != $ranksum * ($i + 1)} { fail "allreduce element $i is $got" }
}

# All-gather of 3 doubles per rank.
set mine [gpucoll::new_doubleArray 3]
set all [gpucoll::new_doubleArray [expr {3 * $size}]]
for {set i 0} {$i < 3} {incr i} { gpucoll::doubleArray_setitem $mine $i [expr {10 * $rank + $i}] }
gpucoll::gc_allgather [addr $mine] [addr $all] 3 $gpucoll::GC_FLOAT64 $comm 0
for {set r 0} {$r < $size} {incr r} {
  for {set i 0} {$i < 3} {incr i} {
    set got [gpucoll::doubleArray_getitem $all [expr {3 * $r + $i}]]
    if {$got != 10 * $r + $i} { fail "allgather element $r/$i is $got" }
  }
}

# Broadcast from the last rank, in place.
set root [expr {$size - 1}]
gpucoll::doubleArray_setitem $mine 0 [expr {100 + $rank}]
gpucoll::gc_broadcast [addr $mine] [addr $mine] 1 $gpucoll::GC_FLOAT64 $root $comm 0
set got [gpucoll::doubleArray_getitem $mine 0]
if {$got != 100 + $root} { fail "broadcast gave $got" }

# A bad root fails alike on every rank: TCL_ERROR with the message and errorCode {GPUCOLL code}.
if {![catch {gpucoll::gc_broadcast [addr $mine] [addr $mine] 1 $gpucoll::GC_FLOAT64 99 $comm 0} msg]} {
  fail "a bad root was accepted"
}
if {[lindex $::errorCode 0] ne "GPUCOLL" || [lindex $::errorCode 1] ne "GC_ERR_INVALID_ARGUMENT"} {
  fail "errorCode is $::errorCode"
}
if {![string match "gc_broadcast: GC_ERR_INVALID_ARGUMENT: *" $msg]} { fail "message is '$msg'" }

# A failure without a communicator, after a call that took one but returns no result code,
# reports its own message, not the communicator's.
gpucoll::gc_comm_algo_table $comm
if {![catch {gpucoll::gc_op_from_name xor} msg] ||
    ![string match "gc_op_from_name: GC_ERR_INVALID_ARGUMENT: unknown op 'xor'*" $msg]} {
  fail "a bad op name gave '$msg'"
}

foreach a [list $send $recv $mine $all] { gpucoll::delete_doubleArray $a }
gpucoll::gc_comm_destroy $comm
# Destroying it again fails with the library's message (the handle is not live any more).
if {![catch {gpucoll::gc_comm_destroy $comm} msg] ||
    ![string match "gc_comm_destroy: GC_ERR_INVALID_USAGE: *not a live communicator*" $msg]} {
  puts stderr "rank $rank: FAIL: a second destroy gave '$msg'"
  exit 1
}
puts "rank $rank of $size: tcl all-reduce, all-gather, broadcast and errors OK"
exit 0
