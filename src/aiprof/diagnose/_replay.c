/* The replay's event loop (aiprof.diagnose.replay._events_loop) in C: the same recurrence,
 * the same float operations in the same order, so the same results bit for bit.
 *
 * The Python loop turns every event's ten values into Python floats and ints (4,096 events at
 * a time) and runs a dozen bytecode compares per event: a replay of the 250 MB synthetic
 * trace (benchmarks/scale.py, 323,208 events) took 0.31 s, 0.04 s with this loop (2-core VM,
 * 2026-12-01), five replays a diagnosis. Here an event is a few loads from the columns'
 * buffers. Used when this extension was compiled (it is
 * optional, like trace/_columns.c); replay.py falls back to the Python loop otherwise, and
 * tests/diagnose/test_replay_compiled.py checks that both give the same results.
 *
 *   run(columns, wait_ptr, wait_idx, unblocked, stream_end, host_wait, busy, scalars)
 *     columns:   tuple of 10 one-dimensional buffers of one length n (any strides, so a
 *                broadcast constant works): kind, stream, dur, sync_id, after, delay, gap,
 *                work, call, own; kind, stream, sync_id, after of any integer type, the
 *                others float64
 *     wait_ptr:  n + 1 integers; wait_idx: integers (event indices)
 *     unblocked: set or frozenset of the sync ids that do not block
 *     stream_end, host_wait, busy: lists of floats, one per stream, updated in place
 *     scalars:   (start_us, latency_us, launch_cap, call_scale, async_call, queue_depth)
 *                floats (queue_depth: a stream's ops in flight at which a launch on it waits,
 *                0: no limit)
 *   Returns (cpu, num_ops, num_drained, sync_wait). Raises ValueError for an index out of
 *   range (a stream, an `after`, a wait), TypeError for a buffer of another type.
 *
 * Built with -ffp-contract=off (setup.py): no fused multiply-add, as CPython computes.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define LAUNCH 0
#define BLOCKING_LAUNCH 1
#define SYNC 2
#define NUM_COLUMNS 10

typedef struct {
    Py_buffer view;
    char code;     /* the struct-module format character */
    int is_float;
    int held;
} Column;

static void
release(Column *columns, int count)
{
    for (int j = 0; j < count; j++) {
        if (columns[j].held) {
            PyBuffer_Release(&columns[j].view);
            columns[j].held = 0;
        }
    }
}

/* A strided, one-dimensional, native-order view of `object` of `length` items (-1: any). */
static int
get_column(PyObject *object, Py_ssize_t length, int want_float, Column *column)
{
    if (PyObject_GetBuffer(object, &column->view, PyBUF_STRIDES | PyBUF_FORMAT) < 0) {
        return -1;
    }
    column->held = 1;
    const char *format = column->view.format ? column->view.format : "B";
    if (*format == '@' || *format == '=' || *format == '<') {
        format++;  /* native order: the extension only builds where that is little-endian or
                    * the format says native ('@'/'=') */
    }
    column->code = format[0];
    if (column->view.ndim != 1 || format[0] == '\0' || format[1] != '\0') {
        PyErr_SetString(PyExc_TypeError, "expected a one-dimensional array of numbers");
        return -1;
    }
    column->is_float = column->code == 'd';
    if (want_float != column->is_float || strchr("dbBhHiIlLqQ?", column->code) == NULL
        || (column->is_float && column->view.itemsize != 8)) {
        PyErr_Format(PyExc_TypeError, "expected %s, got format '%s'",
                     want_float ? "float64" : "integers", column->view.format);
        return -1;
    }
    if (length >= 0 && column->view.shape[0] != length) {
        PyErr_SetString(PyExc_ValueError, "columns of different lengths");
        return -1;
    }
    return 0;
}

static inline const char *
item(const Column *c, Py_ssize_t i)
{
    return (const char *)c->view.buf + i * c->view.strides[0];
}

static inline double
get_float(const Column *c, Py_ssize_t i)
{
    double x;
    memcpy(&x, item(c, i), sizeof x);
    return x;
}

static inline int64_t
get_int(const Column *c, Py_ssize_t i)
{
    const char *p = item(c, i);
    switch (c->code) {
    case 'b': { int8_t x; memcpy(&x, p, 1); return x; }
    case 'B': case '?': { uint8_t x; memcpy(&x, p, 1); return x; }
    case 'h': { int16_t x; memcpy(&x, p, 2); return x; }
    case 'H': { uint16_t x; memcpy(&x, p, 2); return x; }
    default:
        break;
    }
    if (c->view.itemsize == 4) {
        if (c->code == 'I' || c->code == 'L') { uint32_t x; memcpy(&x, p, 4); return x; }
        int32_t x; memcpy(&x, p, 4); return x;
    }
    int64_t x; memcpy(&x, p, 8); return x;  /* a uint64 past 2^63 reads negative: refused */
}

/* Floats of a list of Python floats, or -1 with an exception. */
static int
read_floats(PyObject *list, double *out, Py_ssize_t count)
{
    for (Py_ssize_t s = 0; s < count; s++) {
        out[s] = PyFloat_AsDouble(PyList_GET_ITEM(list, s));
        if (out[s] == -1.0 && PyErr_Occurred()) {
            return -1;
        }
    }
    return 0;
}

static int
write_floats(PyObject *list, const double *values, Py_ssize_t count)
{
    for (Py_ssize_t s = 0; s < count; s++) {
        PyObject *x = PyFloat_FromDouble(values[s]);
        if (x == NULL || PyList_SetItem(list, s, x) < 0) {
            return -1;
        }
    }
    return 0;
}

static int
out_of_range(const char *what)
{
    PyErr_Format(PyExc_ValueError, "%s index out of range", what);
    return -1;
}

/* Whether sync id `id` is not in `unblocked`: 1, 0, or -1 with an exception. */
static int
blocks(PyObject *unblocked, int64_t id)
{
    if (PySet_GET_SIZE(unblocked) == 0) {
        return 1;
    }
    PyObject *key = PyLong_FromLongLong(id);
    if (key == NULL) {
        return -1;
    }
    int found = PySet_Contains(unblocked, key);
    Py_DECREF(key);
    return found < 0 ? -1 : !found;
}

typedef struct {
    double start_us, lat, launch_cap, call_scale, async_call, queue_depth;
} Scalars;

typedef struct {
    double cpu, sync_wait;
    long long num_ops, num_drained;
} Totals;

/* The loop itself: replay.py's _events_loop, statement by statement. */
static int
loop(const Column *c, Py_ssize_t n, const Column *ptr, const Column *idx, PyObject *unblocked,
     double *stream_end, double *host_wait, double *busy, Py_ssize_t num_streams,
     const Scalars *k_, double *end_at, double *in_flight, long long *launched, long long depth,
     Totals *t)
{
    const Column *kind_c = &c[0], *stream_c = &c[1], *dur_c = &c[2], *sync_c = &c[3],
                 *after_c = &c[4], *delay_c = &c[5], *gap_c = &c[6], *work_c = &c[7],
                 *call_c = &c[8], *own_c = &c[9];
    const double start_us = k_->start_us, lat = k_->lat, launch_cap = k_->launch_cap,
                 call_scale = k_->call_scale, async_call = k_->async_call;
    Py_ssize_t num_waits = idx->view.shape[0];
    double cpu = start_us, sync_wait = 0.0;
    long long num_ops = 0, num_drained = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        end_at[k] = start_us;
    }
    for (long long q = 0; q < depth * num_streams; q++) {
        in_flight[q] = start_us;
    }
    for (Py_ssize_t q = 0; depth && q < num_streams; q++) {
        launched[q] = 0;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t kind = get_int(kind_c, k);
        cpu += get_float(work_c, k);
        int block = blocks(unblocked, get_int(sync_c, k));
        if (block < 0) {
            return -1;
        }
        double own_k = get_float(own_c, k), call_k = get_float(call_c, k);
        if (kind == SYNC) {
            if (block) {
                int64_t first = get_int(ptr, k), last = get_int(ptr, k + 1);
                if (last > first) {
                    if (first < 0 || last > num_waits) {
                        return out_of_range("wait");
                    }
                    double drained = 0.0;
                    for (int64_t w = first; w < last; w++) {
                        int64_t j = get_int(idx, w);
                        if (j < 0 || j >= n) {
                            return out_of_range("wait");
                        }
                        /* max(): the first of the largest, replaced only by a greater one */
                        if (w == first || end_at[j] > drained) {
                            drained = end_at[j];
                        }
                    }
                    double waited = drained - cpu;
                    sync_wait += 0.0 > waited ? 0.0 : waited;
                    cpu = drained > cpu ? drained : cpu;
                }
                cpu += own_k;
            }
            continue;
        }
        double call;
        if (kind == LAUNCH) {
            double work_part = launch_cap < call_k ? launch_cap : call_k;
            call = work_part * call_scale + (call_k - work_part);
        }
        else {
            call = async_call < call_k ? async_call : call_k;
        }
        int64_t stream = get_int(stream_c, k), after = get_int(after_c, k);
        if (stream < 0 || stream >= num_streams) {
            return out_of_range("stream");
        }
        if (after >= n || after < -1) {
            return out_of_range("after");
        }
        double end = stream_end[stream], dur = get_float(dur_c, k);
        if (dur > 0) {
            if (depth && launched[stream] >= depth) { /* its queue is full: wait for the oldest */
                double oldest = in_flight[stream * depth + launched[stream] % depth];
                cpu = oldest > cpu ? oldest : cpu;
            }
            double gap = get_float(gap_c, k);
            double submitted = kind == BLOCKING_LAUNCH && block ? cpu : cpu + call;
            double ready = after >= 0 ? end_at[after] + gap : start_us;
            double device_ready = end + gap;
            device_ready = ready > device_ready ? ready : device_ready;
            double host_ready = submitted + lat;
            host_ready = cpu > host_ready ? cpu : host_ready;
            double begin = device_ready > host_ready ? device_ready : host_ready;
            num_ops += 1;
            if (host_ready > device_ready) {
                num_drained += 1;
                host_wait[stream] += host_ready - (end > device_ready ? end : device_ready);
            }
            double delay = get_float(delay_c, k), began = begin + delay;
            if (delay < 0.0) { /* it took the SMs in another stream's op's tail */
                double own = end + gap;
                own = host_ready > own ? host_ready : own;
                began = own > began ? own : began;
            }
            end = began + dur;
            stream_end[stream] = end;
            busy[stream] += dur;
            if (depth) {
                in_flight[stream * depth + launched[stream] % depth] = end;
                launched[stream] += 1;
            }
        }
        else if (after >= 0) {
            double waited_for = end_at[after];
            if (waited_for > end) {
                end = waited_for;
                stream_end[stream] = end;
            }
        }
        end_at[k] = end;
        if (kind == BLOCKING_LAUNCH && block) {
            double waited = end - cpu;
            sync_wait += 0.0 > waited ? 0.0 : waited;
            cpu = (end > cpu ? end : cpu) + own_k;
        }
        else {
            cpu += call;
        }
    }
    t->cpu = cpu;
    t->sync_wait = sync_wait;
    t->num_ops = num_ops;
    t->num_drained = num_drained;
    return 0;
}

static PyObject *
run(PyObject *module, PyObject *args)
{
    PyObject *columns_arg, *ptr_arg, *idx_arg, *unblocked, *stream_end_list, *host_wait_list,
        *busy_list;
    Scalars s;
    if (!PyArg_ParseTuple(args, "O!OOOO!O!O!(dddddd)", &PyTuple_Type, &columns_arg, &ptr_arg,
                          &idx_arg, &unblocked, &PyList_Type,
                          &stream_end_list, &PyList_Type, &host_wait_list, &PyList_Type,
                          &busy_list, &s.start_us, &s.lat, &s.launch_cap, &s.call_scale,
                          &s.async_call, &s.queue_depth)) {
        return NULL;
    }
    if (!PyAnySet_Check(unblocked)) {
        PyErr_SetString(PyExc_TypeError, "unblocked must be a set or frozenset");
        return NULL;
    }
    if (PyTuple_GET_SIZE(columns_arg) != NUM_COLUMNS) {
        PyErr_SetString(PyExc_ValueError, "expected 10 columns");
        return NULL;
    }
    Py_ssize_t num_streams = PyList_GET_SIZE(stream_end_list);
    if (PyList_GET_SIZE(host_wait_list) != num_streams
        || PyList_GET_SIZE(busy_list) != num_streams) {
        PyErr_SetString(PyExc_ValueError, "stream lists of different lengths");
        return NULL;
    }
    /* kind, stream, dur, sync_id, after, delay, gap, work, call, own */
    static const int is_float[NUM_COLUMNS] = {0, 0, 1, 0, 0, 1, 1, 1, 1, 1};
    Column c[NUM_COLUMNS + 2];
    memset(c, 0, sizeof c);
    PyObject *result = NULL;
    double *floats = NULL;
    long long *launched = NULL;
    Py_ssize_t n = -1;
    for (int j = 0; j < NUM_COLUMNS; j++) {
        if (get_column(PyTuple_GET_ITEM(columns_arg, j), n, is_float[j], &c[j]) < 0) {
            goto done;
        }
        n = c[j].view.shape[0];
    }
    if (get_column(ptr_arg, n + 1, 0, &c[NUM_COLUMNS]) < 0
        || get_column(idx_arg, -1, 0, &c[NUM_COLUMNS + 1]) < 0) {
        goto done;
    }
    long long depth = s.queue_depth > 0 ? (long long)s.queue_depth : 0;
    floats = PyMem_Malloc(sizeof(double) * (size_t)(3 * num_streams + n + 1 + depth * num_streams));
    launched = PyMem_Malloc(sizeof(long long) * (size_t)(depth ? num_streams : 1));
    if (floats == NULL || launched == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    double *stream_end = floats, *host_wait = floats + num_streams,
           *busy = floats + 2 * num_streams, *end_at = floats + 3 * num_streams,
           *in_flight = end_at + n + 1;
    if (read_floats(stream_end_list, stream_end, num_streams) < 0
        || read_floats(host_wait_list, host_wait, num_streams) < 0
        || read_floats(busy_list, busy, num_streams) < 0) {
        goto done;
    }
    Totals t;
    if (loop(c, n, &c[NUM_COLUMNS], &c[NUM_COLUMNS + 1], unblocked, stream_end, host_wait,
             busy, num_streams, &s, end_at, in_flight, launched, depth, &t) < 0) {
        goto done;
    }
    if (write_floats(stream_end_list, stream_end, num_streams) < 0
        || write_floats(host_wait_list, host_wait, num_streams) < 0
        || write_floats(busy_list, busy, num_streams) < 0) {
        goto done;
    }
    result = Py_BuildValue("(dLLd)", t.cpu, t.num_ops, t.num_drained, t.sync_wait);
done:
    PyMem_Free(floats);
    PyMem_Free(launched);
    release(c, NUM_COLUMNS + 2);
    return result;
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, "The replay's event loop over the timeline's columns."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_replay", "The replay's event loop, compiled.", -1, methods,
};

PyMODINIT_FUNC
PyInit__replay(void)
{
    return PyModule_Create(&module);
}
