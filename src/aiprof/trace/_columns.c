/* Copy fields of decoded events into column buffers, all columns in one pass.
 *
 * The pure-Python reader builds each column with np.fromiter(map(attrgetter(f), objects)):
 * one pass over the objects per column, an attribute lookup and a conversion per element.
 * Here the objects are msgspec Structs whose fields are slot members (member descriptors
 * with a byte offset), so a column value is one pointer read. Used when this extension was
 * compiled (it is optional); trace/fastpath.py falls back to the Python code otherwise, and
 * tests check that both give the same tables.
 *
 *   fill(objects, descriptors, codes, buffers)
 *     objects:     list of instances of the descriptors' class (or a subclass)
 *     descriptors: tuple of member descriptors (e.g. Event.__dict__["ts"])
 *     codes:       bytes, one per descriptor: b'd' float64, b'q' int64
 *     buffers:     tuple of writable buffers of at least len(objects) * 8 bytes
 *   Raises TypeError for a value of another type (an int|str field holding a str),
 *   OverflowError for an int beyond 64 bits; the caller then takes the Python path.
 *
 *   present(objects, descriptor, sentinel, buffer)
 *     Writes 1 (int64) where the object's field is not `sentinel` (by identity), else 0:
 *     which events carry an optional field whose default is a shared object.
 *
 *   intern(objects, descriptor, table, buffer)
 *     Writes for each object the id of its str field in `table` (a dict str -> int whose
 *     ids are 0..len-1 in insertion order), adding new strings with the next id.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>

#define MAX_COLUMNS 32

typedef struct {
    Py_ssize_t offset;
    PyTypeObject *owner;
} Slot;

static int
slot_of(PyObject *descriptor, Slot *slot)
{
    if (!PyObject_TypeCheck(descriptor, &PyMemberDescr_Type)) {
        PyErr_SetString(PyExc_TypeError, "expected a member descriptor");
        return -1;
    }
    PyMemberDescrObject *member = (PyMemberDescrObject *)descriptor;
    if (member->d_member->type != T_OBJECT_EX && member->d_member->type != T_OBJECT) {
        PyErr_SetString(PyExc_TypeError, "member is not an object slot");
        return -1;
    }
    slot->offset = member->d_member->offset;
    slot->owner = member->d_common.d_type;
    return 0;
}

/* The value in a slot of `object`, checked to be an instance of the slot's class. */
static PyObject *
slot_value(PyObject *object, const Slot *slot, PyTypeObject **known)
{
    if (Py_TYPE(object) != *known) {
        if (!PyObject_TypeCheck(object, slot->owner)) {
            PyErr_Format(PyExc_TypeError, "expected %s objects, got %s",
                         slot->owner->tp_name, Py_TYPE(object)->tp_name);
            return NULL;
        }
        *known = Py_TYPE(object);
    }
    PyObject *value = *(PyObject **)((char *)object + slot->offset);
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "field not set");
    }
    return value;
}

static int
get_buffers(PyObject *buffers, Py_ssize_t count, Py_ssize_t rows, Py_buffer *views)
{
    for (Py_ssize_t j = 0; j < count; j++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(buffers, j), &views[j],
                               PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
            for (Py_ssize_t k = 0; k < j; k++) {
                PyBuffer_Release(&views[k]);
            }
            return -1;
        }
        if (views[j].len < rows * 8) {
            for (Py_ssize_t k = 0; k <= j; k++) {
                PyBuffer_Release(&views[k]);
            }
            PyErr_SetString(PyExc_ValueError, "buffer too small");
            return -1;
        }
    }
    return 0;
}

/* The slot of `descriptor` and a writable view of `buffer` holding `rows` int64 values. */
static int
one_column(PyObject *descriptor, PyObject *buffer, Py_ssize_t rows, Slot *slot, Py_buffer *view)
{
    if (slot_of(descriptor, slot) < 0) {
        return -1;
    }
    PyObject *one = PyTuple_Pack(1, buffer);
    if (one == NULL) {
        return -1;
    }
    int got = get_buffers(one, 1, rows, view);
    Py_DECREF(one);
    return got;
}

static PyObject *
fill(PyObject *module, PyObject *args)
{
    PyObject *objects, *descriptors, *codes, *buffers;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyList_Type, &objects, &PyTuple_Type,
                          &descriptors, &PyBytes_Type, &codes, &PyTuple_Type, &buffers)) {
        return NULL;
    }
    Py_ssize_t columns = PyTuple_GET_SIZE(descriptors);
    if (columns > MAX_COLUMNS || PyBytes_GET_SIZE(codes) != columns
        || PyTuple_GET_SIZE(buffers) != columns) {
        PyErr_SetString(PyExc_ValueError, "descriptors, codes and buffers must match");
        return NULL;
    }
    const char *code = PyBytes_AS_STRING(codes);
    Slot slots[MAX_COLUMNS];
    for (Py_ssize_t j = 0; j < columns; j++) {
        if (code[j] != 'd' && code[j] != 'q') {
            PyErr_SetString(PyExc_ValueError, "codes are b'd' or b'q'");
            return NULL;
        }
        if (slot_of(PyTuple_GET_ITEM(descriptors, j), &slots[j]) < 0) {
            return NULL;
        }
    }
    Py_ssize_t rows = PyList_GET_SIZE(objects);
    Py_buffer views[MAX_COLUMNS];
    if (get_buffers(buffers, columns, rows, views) < 0) {
        return NULL;
    }
    PyTypeObject *known = NULL;
    int failed = 0;
    for (Py_ssize_t i = 0; i < rows && !failed; i++) {
        /* the list is not resized below: nothing here runs Python code */
        PyObject *object = PyList_GET_ITEM(objects, i);
        for (Py_ssize_t j = 0; j < columns; j++) {
            PyObject *value = slot_value(object, &slots[j], &known);
            if (value == NULL) {
                failed = 1;
                break;
            }
            if (code[j] == 'd') {
                double x;
                if (PyFloat_CheckExact(value)) {
                    x = PyFloat_AS_DOUBLE(value);
                }
                else if (PyLong_CheckExact(value)) {
                    x = PyLong_AsDouble(value);
                    if (x == -1.0 && PyErr_Occurred()) {
                        failed = 1;
                        break;
                    }
                }
                else {
                    PyErr_Format(PyExc_TypeError, "not a number: %s", Py_TYPE(value)->tp_name);
                    failed = 1;
                    break;
                }
                ((double *)views[j].buf)[i] = x;
            }
            else {
                if (!PyLong_CheckExact(value)) {
                    PyErr_Format(PyExc_TypeError, "not an int: %s", Py_TYPE(value)->tp_name);
                    failed = 1;
                    break;
                }
                int overflow = 0;
                long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
                if (overflow) {
                    PyErr_SetString(PyExc_OverflowError, "int beyond 64 bits");
                    failed = 1;
                    break;
                }
                ((int64_t *)views[j].buf)[i] = (int64_t)x;
            }
        }
    }
    for (Py_ssize_t j = 0; j < columns; j++) {
        PyBuffer_Release(&views[j]);
    }
    if (failed) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
intern_strings(PyObject *module, PyObject *args)
{
    PyObject *objects, *descriptor, *table, *buffer;
    if (!PyArg_ParseTuple(args, "O!OO!O", &PyList_Type, &objects, &descriptor, &PyDict_Type,
                          &table, &buffer)) {
        return NULL;
    }
    Slot slot;
    Py_buffer view;
    Py_ssize_t rows = PyList_GET_SIZE(objects);
    if (one_column(descriptor, buffer, rows, &slot, &view) < 0) {
        return NULL;
    }
    PyTypeObject *known = NULL;
    int failed = 0;
    int64_t *out = (int64_t *)view.buf;
    for (Py_ssize_t i = 0; i < rows; i++) {
        /* dict operations may run Python code (a str subclass's __eq__); exact str only */
        PyObject *value = slot_value(PyList_GET_ITEM(objects, i), &slot, &known);
        if (value == NULL) {
            failed = 1;
            break;
        }
        if (!PyUnicode_CheckExact(value)) {
            PyErr_Format(PyExc_TypeError, "not a str: %s", Py_TYPE(value)->tp_name);
            failed = 1;
            break;
        }
        PyObject *id = PyDict_GetItemWithError(table, value);
        if (id == NULL) {
            if (PyErr_Occurred()) {
                failed = 1;
                break;
            }
            id = PyLong_FromSsize_t(PyDict_GET_SIZE(table));
            if (id == NULL || PyDict_SetItem(table, value, id) < 0) {
                Py_XDECREF(id);
                failed = 1;
                break;
            }
            Py_DECREF(id); /* the table holds it */
        }
        out[i] = (int64_t)PyLong_AsLongLong(id);
    }
    PyBuffer_Release(&view);
    if (failed) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
present(PyObject *module, PyObject *args)
{
    PyObject *objects, *descriptor, *sentinel, *buffer;
    if (!PyArg_ParseTuple(args, "O!OOO", &PyList_Type, &objects, &descriptor, &sentinel,
                          &buffer)) {
        return NULL;
    }
    Slot slot;
    Py_buffer view;
    Py_ssize_t rows = PyList_GET_SIZE(objects);
    if (one_column(descriptor, buffer, rows, &slot, &view) < 0) {
        return NULL;
    }
    PyTypeObject *known = NULL;
    int64_t *out = (int64_t *)view.buf;
    for (Py_ssize_t i = 0; i < rows; i++) {
        PyObject *value = slot_value(PyList_GET_ITEM(objects, i), &slot, &known);
        if (value == NULL) {
            PyBuffer_Release(&view);
            return NULL;
        }
        out[i] = value != sentinel;
    }
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"present", present, METH_VARARGS, "Where a field is not a given default object."},
    {"fill", fill, METH_VARARGS, "Copy struct fields into column buffers in one pass."},
    {"intern", intern_strings, METH_VARARGS, "Ids of a str field in a dict string table."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_columns", "Columns from decoded events, in one pass.", -1, methods,
};

PyMODINIT_FUNC
PyInit__columns(void)
{
    return PyModule_Create(&module);
}
