/*
 * tracehound._speedups: the per-span paths of the engine (see _speedups.h).
 *
 * - SlotsMaker(cls, names) makes instances of a slotted class (a frozen dataclass with
 *   `slots=True`: SpanOutcome, FinalizedTrace, Trajectory, Run, EvaluationResult) from
 *   positional values, without its generated __init__, which sets each field through
 *   object.__setattr__ (a call per field, ~1 µs each). The instance is allocated through the
 *   class and each value stored in its slot, as the slot descriptor's setter would store it.
 * - text_size(span) is tracehound.engine._text_size's sum, for a span of the usual types.
 * - genai_extract(view, attributes, config) is tracehound.conventions.genai.extract for a span
 *   without log events whose attributes are all of the usual types; the Python code stays the
 *   reference and runs for anything else (None is returned then, with nothing changed).
 *
 * C99, ordinary CPython API only. The GIL is held throughout.
 */
#include "_speedups.h"

#include <structmember.h>

/* --- strings --------------------------------------------------------------------------------- */

enum {
    K_PROVIDER_NAME,
    K_SYSTEM,
    K_OPERATION_NAME,
    K_TOOL_NAME,
    K_INPUT_MESSAGES,
    K_OUTPUT_MESSAGES,
    K_REQUEST_MODEL,
    K_RESPONSE_MODEL,
    K_AGENT_NAME,
    K_INPUT_TOKENS,
    K_PROMPT_TOKENS,
    K_OUTPUT_TOKENS,
    K_COMPLETION_TOKENS,
    K_FINISH_REASONS,
    K_SYSTEM_INSTRUCTIONS,
    K_TOOL_CALL_ID,
    K_TOOL_CALL_ARGUMENTS,
    K_TOOL_CALL_RESULT,
    F_AGENT_NAME,
    F_MODEL,
    F_PROVIDER,
    F_INPUT_TOKENS,
    F_OUTPUT_TOKENS,
    F_FINISH_REASONS,
    F_INPUT_MESSAGES,
    F_OUTPUT_MESSAGES,
    F_TOOL_NAME,
    F_TOOL_CALL_ID,
    F_TOOL_ARGUMENTS,
    F_TOOL_RESULT,
    F_FINISH_REASON,
    F_PARTS,
    F_CONTENT,
    F_HISTORY,
    F_SYSTEM_INSTRUCTIONS,
    F_DECLARED_OUTPUT,
    F_DOCUMENTS,
    O_TOOL,
    O_LLM,
    O_OTHER,
    O_RETRIEVAL,
    K_ERROR_TYPE,
    F_STATUS_CODE,
    F_ERROR,
    V_NAME,
    V_SCOPE_NAME,
    V_ATTRIBUTES,
    V_WIRE_AT,
    V_EVENTS,
    V_PENDING,
    V_START,
    V_END,
    V_STATUS_CODE,
    V_STATUS_MESSAGE,
    F_PROBLEMS,
    C_COUNT
};

static const char *const CORE_STRING[C_COUNT] = {
    [K_PROVIDER_NAME] = "gen_ai.provider.name",
    [K_SYSTEM] = "gen_ai.system",
    [K_OPERATION_NAME] = "gen_ai.operation.name",
    [K_TOOL_NAME] = "gen_ai.tool.name",
    [K_INPUT_MESSAGES] = "gen_ai.input.messages",
    [K_OUTPUT_MESSAGES] = "gen_ai.output.messages",
    [K_REQUEST_MODEL] = "gen_ai.request.model",
    [K_RESPONSE_MODEL] = "gen_ai.response.model",
    [K_AGENT_NAME] = "gen_ai.agent.name",
    [K_INPUT_TOKENS] = "gen_ai.usage.input_tokens",
    [K_PROMPT_TOKENS] = "gen_ai.usage.prompt_tokens",
    [K_OUTPUT_TOKENS] = "gen_ai.usage.output_tokens",
    [K_COMPLETION_TOKENS] = "gen_ai.usage.completion_tokens",
    [K_FINISH_REASONS] = "gen_ai.response.finish_reasons",
    [K_SYSTEM_INSTRUCTIONS] = "gen_ai.system_instructions",
    [K_TOOL_CALL_ID] = "gen_ai.tool.call.id",
    [K_TOOL_CALL_ARGUMENTS] = "gen_ai.tool.call.arguments",
    [K_TOOL_CALL_RESULT] = "gen_ai.tool.call.result",
    [F_AGENT_NAME] = "agent_name",
    [F_MODEL] = "model",
    [F_PROVIDER] = "provider",
    [F_INPUT_TOKENS] = "input_tokens",
    [F_OUTPUT_TOKENS] = "output_tokens",
    [F_FINISH_REASONS] = "finish_reasons",
    [F_INPUT_MESSAGES] = "input_messages",
    [F_OUTPUT_MESSAGES] = "output_messages",
    [F_TOOL_NAME] = "tool_name",
    [F_TOOL_CALL_ID] = "tool_call_id",
    [F_TOOL_ARGUMENTS] = "tool_arguments",
    [F_TOOL_RESULT] = "tool_result",
    [F_FINISH_REASON] = "finish_reason",
    [F_PARTS] = "parts",
    [F_CONTENT] = "content",
    [F_HISTORY] = "history",
    [F_SYSTEM_INSTRUCTIONS] = "system_instructions",
    [F_DECLARED_OUTPUT] = "declared_output",
    [F_DOCUMENTS] = "documents",
    [O_TOOL] = "tool",
    [O_LLM] = "llm",
    [O_OTHER] = "other",
    [O_RETRIEVAL] = "retrieval",
    [K_ERROR_TYPE] = "error.type",
    [F_STATUS_CODE] = "status_code",
    [F_ERROR] = "error",
    [V_NAME] = "name",
    [V_SCOPE_NAME] = "scope_name",
    [V_ATTRIBUTES] = "_attributes",
    [V_WIRE_AT] = "_wire_at",
    [V_EVENTS] = "_events",
    [V_PENDING] = "_pending",
    [V_START] = "_start_ns",
    [V_END] = "_end_ns",
    [V_STATUS_CODE] = "_status_code",
    [V_STATUS_MESSAGE] = "_status_message",
    [F_PROBLEMS] = "problems",
};

/* Interned once per process (interned strings live as long as the interpreter's table). */
static PyObject *core_str[C_COUNT];
/* Slot offsets of the attributes read and set, by name. */
static slot_cache core_slots[C_COUNT];

/* obj.<core_str[which]> (a new reference, or NULL with an exception set). */
static PyObject *
core_get(PyObject *obj, int which)
{
    return tracehound_slot_get(&core_slots[which], obj, core_str[which]);
}

/* --- slots ------------------------------------------------------------------------------------- */

/* The offset of `name`'s object slot in instances of `type` (0: none): a member descriptor of
 * an object slot, found where attribute lookup finds it, for a class that reads attributes the
 * generic way. */
static Py_ssize_t
slot_offset(PyTypeObject *type, PyObject *name)
{
    PyObject *descr;
    PyMemberDef *member;
    if (type->tp_getattro != PyObject_GenericGetAttr ||
        type->tp_setattro != PyObject_GenericSetAttr) {
        return 0;
    }
    descr = _PyType_Lookup(type, name); /* borrowed; assigns the version tag */
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        return 0;
    }
    member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX || (member->flags & READONLY) ||
        !PyType_IsSubtype(type, PyDescr_TYPE(descr))) {
        return 0;
    }
    return member->offset;
}

/* The slot's offset for obj's class, the cache refreshed if needed (0: none). */
static Py_ssize_t
cached_offset(slot_cache *cache, PyObject *obj, PyObject *name)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (cache->type == type && PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG) &&
        cache->tag == type->tp_version_tag) {
        return cache->offset;
    }
    if (PyErr_Occurred()) {
        return 0; /* refreshed only from a clean state */
    }
    Py_INCREF(type);
    Py_XSETREF(cache->type, type);
    cache->offset = slot_offset(type, name);
    if (!PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) {
        cache->offset = 0;
    }
    cache->tag = type->tp_version_tag;
    return cache->offset;
}

PyObject *
tracehound_slot_get(slot_cache *cache, PyObject *obj, PyObject *name)
{
    Py_ssize_t offset = cached_offset(cache, obj, name);
    if (offset != 0) {
        PyObject *value = *(PyObject **)((char *)obj + offset);
        if (value != NULL) {
            Py_INCREF(value);
            return value;
        }
    }
    return PyObject_GetAttr(obj, name); /* and its AttributeError for an unset slot */
}

int
tracehound_slot_set(slot_cache *cache, PyObject *obj, PyObject *name, PyObject *value)
{
    Py_ssize_t offset = cached_offset(cache, obj, name);
    if (offset != 0 && value != NULL) { /* what the descriptor's setter does */
        PyObject **slot = (PyObject **)((char *)obj + offset);
        Py_INCREF(value);
        Py_XSETREF(*slot, value);
        return 0;
    }
    return PyObject_SetAttr(obj, name, value);
}

/* --- SlotsMaker ------------------------------------------------------------------------------ */

typedef struct {
    PyObject_VAR_HEAD
    PyTypeObject *target;
    PyObject *defaults; /* a tuple: the values of the last fields when not given */
    vectorcallfunc vectorcall;
    Py_ssize_t offsets[1]; /* Py_SIZE(self) of them (the items of this variable-size object) */
} SlotsMaker;

static PyObject *
maker_call(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    SlotsMaker *self = (SlotsMaker *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), count = Py_SIZE(self), i;
    Py_ssize_t first_default = count - PyTuple_GET_SIZE(self->defaults);
    PyObject *obj, *value;

    if (nargs < first_default || nargs > count ||
        (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_Format(PyExc_TypeError,
                     "making %.100s takes from %zd to %zd positional arguments (%zd given)",
                     self->target->tp_name, first_default, count, nargs);
        return NULL;
    }
    obj = self->target->tp_alloc(self->target, 0); /* slots zeroed */
    if (obj == NULL) {
        return NULL;
    }
    for (i = 0; i < count; i++) { /* what the slot descriptor's setter stores */
        PyObject **slot = (PyObject **)((char *)obj + self->offsets[i]);
        if (i < nargs) {
            value = args[i];
            Py_INCREF(value);
        }
        else {
            value = PyTuple_GET_ITEM(self->defaults, i - first_default);
            if (value == (PyObject *)&PyList_Type) {
                value = PyList_New(0); /* default_factory=list */
                if (value == NULL) {
                    Py_DECREF(obj);
                    return NULL;
                }
            }
            else {
                Py_INCREF(value);
            }
        }
        Py_XSETREF(*slot, value);
    }
    return obj;
}

static PyObject *
maker_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *target, *names, *defaults = NULL;
    PyTypeObject *target_type;
    SlotsMaker *self;
    Py_ssize_t count, i;

    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "SlotsMaker() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!O!|O!:SlotsMaker", &PyType_Type, &target, &PyTuple_Type,
                          &names, &PyTuple_Type, &defaults)) {
        return NULL;
    }
    target_type = (PyTypeObject *)target;
    if (target_type->tp_new != PyBaseObject_Type.tp_new || target_type->tp_itemsize != 0) {
        PyErr_Format(PyExc_TypeError, "SlotsMaker(): %.100s is not made by object.__new__",
                     target_type->tp_name);
        return NULL;
    }
    count = PyTuple_GET_SIZE(names);
    if (defaults != NULL && PyTuple_GET_SIZE(defaults) > count) {
        PyErr_SetString(PyExc_TypeError, "SlotsMaker(): more defaults than names");
        return NULL;
    }
    self = (SlotsMaker *)type->tp_alloc(type, count);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = maker_call;
    self->defaults = defaults != NULL ? defaults : PyTuple_New(0);
    if (self->defaults == NULL) {
        goto fail;
    }
    Py_XINCREF(defaults);
    for (i = 0; i < count; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i), *descr;
        PyMemberDef *member;
        if (!PyUnicode_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "SlotsMaker(): names must be strings");
            goto fail;
        }
        descr = PyObject_GetAttr(target, name);
        if (descr == NULL) {
            goto fail;
        }
        member = Py_IS_TYPE(descr, &PyMemberDescr_Type) ? ((PyMemberDescrObject *)descr)->d_member
                                                         : NULL;
        if (member == NULL || member->type != T_OBJECT_EX || (member->flags & READONLY) ||
            !PyType_IsSubtype(target_type, PyDescr_TYPE(descr))) {
            PyErr_Format(PyExc_TypeError, "SlotsMaker(): %.100s.%U is not a writable slot",
                         target_type->tp_name, name);
            Py_DECREF(descr);
            goto fail;
        }
        self->offsets[i] = member->offset;
        Py_DECREF(descr);
    }
    Py_INCREF(target);
    self->target = target_type;
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static void
maker_dealloc(PyObject *obj)
{
    SlotsMaker *self = (SlotsMaker *)obj;
    PyTypeObject *type = Py_TYPE(obj);
    Py_XDECREF(self->target);
    Py_XDECREF(self->defaults);
    type->tp_free(obj);
    Py_DECREF(type);
}

static PyMemberDef maker_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(SlotsMaker, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(maker_doc,
"SlotsMaker(cls, names, defaults=(), /)\n"
"--\n"
"\n"
"A callable making `cls` instances from positional values, one per name of `names`: the\n"
"instance is allocated through `cls` (no __init__, no __post_init__) and each value stored in\n"
"the slot of that name, as its descriptor's setter stores it. `defaults` are the values of the\n"
"last names when not given; the `list` class among them stands for a new empty list (a\n"
"dataclass field with default_factory=list). For slotted dataclasses, whose generated\n"
"__init__ runs Python code per field (object.__setattr__ calls when frozen); `names` must be\n"
"all the fields, so that the instance equals the one the class would make.\n"
"Raises TypeError unless `cls` is made by object.__new__ and each name is a writable object\n"
"slot of it.");

static PyType_Slot maker_slots[] = {
    {Py_tp_new, maker_new},
    {Py_tp_dealloc, maker_dealloc},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, maker_members},
    {Py_tp_doc, (void *)maker_doc},
    {0, NULL},
};

static PyType_Spec maker_spec = {
    "tracehound._speedups.SlotsMaker",
    offsetof(SlotsMaker, offsets),
    sizeof(Py_ssize_t),
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL
#ifdef Py_TPFLAGS_IMMUTABLETYPE
        | Py_TPFLAGS_IMMUTABLETYPE
#endif
    ,
    maker_slots,
};

/* --- SlotProperty ---------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *slot; /* the member descriptor of the slot read */
    PyObject *fget; /* what reads the value when the slot holds none */
    Py_ssize_t offset;
} SlotProperty;

static PyObject *
slotprop_get(PyObject *self, PyObject *obj, PyObject *type)
{
    SlotProperty *p = (SlotProperty *)self;
    PyObject *value;
    (void)type;
    if (obj == NULL) {
        return Py_NewRef(self);
    }
    if (!PyObject_TypeCheck(obj, PyDescr_TYPE(p->slot))) {
        return PyObject_CallOneArg(p->fget, obj); /* not an instance: the function decides */
    }
    value = *(PyObject **)((char *)obj + p->offset);
    if (value != NULL && value != Py_None) {
        return Py_NewRef(value);
    }
    return PyObject_CallOneArg(p->fget, obj);
}

static int
slotprop_set(PyObject *self, PyObject *obj, PyObject *value)
{
    (void)obj;
    (void)value;
    PyErr_Format(PyExc_AttributeError, "property of %R has no setter or deleter",
                 ((SlotProperty *)self)->fget);
    return -1;
}

static PyObject *
slotprop_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *slot, *fget;
    PyMemberDef *member;
    SlotProperty *self;

    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "SlotProperty() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO:SlotProperty", &slot, &fget)) {
        return NULL;
    }
    member = Py_IS_TYPE(slot, &PyMemberDescr_Type) ? ((PyMemberDescrObject *)slot)->d_member
                                                   : NULL;
    if (member == NULL || member->type != T_OBJECT_EX || member->offset <= 0) {
        PyErr_SetString(PyExc_TypeError, "SlotProperty() takes an object slot's descriptor");
        return NULL;
    }
    if (!PyCallable_Check(fget)) {
        PyErr_SetString(PyExc_TypeError, "SlotProperty() takes a callable");
        return NULL;
    }
    self = (SlotProperty *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->slot = Py_NewRef(slot);
    self->fget = Py_NewRef(fget);
    self->offset = member->offset;
    return (PyObject *)self;
}

static int
slotprop_traverse(PyObject *obj, visitproc visit, void *arg)
{
    SlotProperty *self = (SlotProperty *)obj;
    Py_VISIT(Py_TYPE(obj));
    Py_VISIT(self->slot);
    Py_VISIT(self->fget);
    return 0;
}

static int
slotprop_clear(PyObject *obj)
{
    SlotProperty *self = (SlotProperty *)obj;
    Py_CLEAR(self->slot);
    Py_CLEAR(self->fget);
    return 0;
}

static void
slotprop_dealloc(PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    PyObject_GC_UnTrack(obj);
    slotprop_clear(obj);
    type->tp_free(obj);
    Py_DECREF(type);
}

static PyMemberDef slotprop_members[] = {
    {"fget", T_OBJECT, offsetof(SlotProperty, fget), READONLY, NULL},
    {"slot", T_OBJECT, offsetof(SlotProperty, slot), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(slotprop_doc,
"SlotProperty(slot, fget, /)\n"
"--\n"
"\n"
"A read-only property whose value is what the object slot `slot` (its member descriptor)\n"
"holds, unless it holds None or nothing: fget(obj) then. The property\n"
"`property(fget)` for a function that returns that slot's value when it is set and not None,\n"
"read without calling it (a lazily filled field, read many times once filled).");

static PyType_Slot slotprop_slots[] = {
    {Py_tp_new, slotprop_new},
    {Py_tp_dealloc, slotprop_dealloc},
    {Py_tp_traverse, slotprop_traverse},
    {Py_tp_clear, slotprop_clear},
    {Py_tp_descr_get, slotprop_get},
    {Py_tp_descr_set, slotprop_set},
    {Py_tp_members, slotprop_members},
    {Py_tp_doc, (void *)slotprop_doc},
    {0, NULL},
};

static PyType_Spec slotprop_spec = {
    "tracehound._speedups.SlotProperty",
    sizeof(SlotProperty),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    slotprop_slots,
};

/* --- text_size ------------------------------------------------------------------------------- */

/* Adds to *size the length of obj.<field>, an exact str or None (0); unhandled otherwise. */
static int
add_str_field(PyObject *obj, int field, Py_ssize_t *size)
{
    PyObject *value = core_get(obj, field);
    int st = ST_OK;
    if (value == NULL) {
        return ST_ERROR;
    }
    if (PyUnicode_CheckExact(value)) {
        *size += PyUnicode_GET_LENGTH(value);
    }
    else if (value != Py_None) {
        st = ST_UNHANDLED;
    }
    Py_DECREF(value);
    return st;
}

/* The list obj.<field>, a new reference; NULL with *st set when it is not an exact list. */
static PyObject *
list_field(PyObject *obj, int field, int *st)
{
    PyObject *value = core_get(obj, field);
    if (value == NULL) {
        *st = ST_ERROR;
        return NULL;
    }
    if (!PyList_CheckExact(value)) {
        Py_DECREF(value);
        *st = ST_UNHANDLED;
        return NULL;
    }
    *st = ST_OK;
    return value;
}

/* The text of messages: the lengths of their parts' contents (str or None). */
static int
add_messages_size(PyObject *span, int field, Py_ssize_t *size)
{
    int st;
    Py_ssize_t i, j;
    PyObject *messages = list_field(span, field, &st);
    if (messages == NULL) {
        return st;
    }
    for (i = 0; st == ST_OK && i < PyList_GET_SIZE(messages); i++) {
        PyObject *message = PyList_GET_ITEM(messages, i), *parts;
        Py_INCREF(message);
        parts = list_field(message, F_PARTS, &st);
        Py_DECREF(message);
        for (j = 0; parts != NULL && st == ST_OK && j < PyList_GET_SIZE(parts); j++) {
            PyObject *part = PyList_GET_ITEM(parts, j);
            Py_INCREF(part);
            st = add_str_field(part, F_CONTENT, size);
            Py_DECREF(part);
        }
        Py_XDECREF(parts);
    }
    Py_DECREF(messages);
    return st;
}

PyDoc_STRVAR(text_size_doc,
"text_size($module, span, /)\n"
"--\n"
"\n"
"The text size tracehound.engine._text_size sums for a NormalizedSpan (without setting\n"
"text_bytes): the contents of its input, output and history message parts, its system\n"
"instructions, its tool arguments, tool result and declared output when they are strings, its\n"
"documents' contents. None when a value is of another type than the usual ones (lists, exact\n"
"str or None); the caller then runs the Python code.");

static PyObject *
text_size(PyObject *module, PyObject *span)
{
    static const int message_fields[] = {F_INPUT_MESSAGES, F_OUTPUT_MESSAGES, F_HISTORY};
    static const int str_fields[] = {F_TOOL_ARGUMENTS, F_TOOL_RESULT, F_DECLARED_OUTPUT};
    Py_ssize_t size = 0, i;
    PyObject *list, *value;
    int st = ST_OK;
    size_t k;

    (void)module;
    for (k = 0; st == ST_OK && k < 3; k++) {
        st = add_messages_size(span, message_fields[k], &size);
    }
    if (st == ST_OK) {
        list = list_field(span, F_SYSTEM_INSTRUCTIONS, &st);
        for (i = 0; list != NULL && st == ST_OK && i < PyList_GET_SIZE(list); i++) {
            value = PyList_GET_ITEM(list, i);
            if (!PyUnicode_CheckExact(value)) {
                st = ST_UNHANDLED;
            }
            else {
                size += PyUnicode_GET_LENGTH(value);
            }
        }
        Py_XDECREF(list);
    }
    for (k = 0; st == ST_OK && k < 3; k++) {
        value = core_get(span, str_fields[k]);
        if (value == NULL) {
            st = ST_ERROR;
        }
        else {
            if (PyUnicode_CheckExact(value)) {
                size += PyUnicode_GET_LENGTH(value);
            }
            else if (PyUnicode_Check(value)) {
                st = ST_UNHANDLED; /* a str subclass: its own __len__ */
            }
            Py_DECREF(value);
        }
    }
    if (st == ST_OK) {
        list = list_field(span, F_DOCUMENTS, &st);
        for (i = 0; list != NULL && st == ST_OK && i < PyList_GET_SIZE(list); i++) {
            value = PyList_GET_ITEM(list, i);
            Py_INCREF(value);
            st = add_str_field(value, F_CONTENT, &size);
            Py_DECREF(value);
        }
        Py_XDECREF(list);
    }
    if (st == ST_ERROR) {
        return NULL;
    }
    if (st == ST_UNHANDLED) {
        Py_RETURN_NONE;
    }
    return PyLong_FromSsize_t(size);
}

/* --- genai_extract --------------------------------------------------------------------------- */

/* attributes.get(key): a borrowed reference or NULL (absent, or an error if one is set). */
static PyObject *
attr_get(PyObject *attributes, int key)
{
    return PyDict_GetItemWithError(attributes, core_str[key]);
}

/* `value if isinstance(value, str) and value else None` for the value of `key` (a new
 * reference, NULL for None). */
static int
nonempty_str(PyObject *attributes, int key, PyObject **out)
{
    PyObject *value = attr_get(attributes, key);
    *out = NULL;
    if (value == NULL) {
        return PyErr_Occurred() ? ST_ERROR : ST_OK;
    }
    if (PyUnicode_CheckExact(value)) {
        if (PyUnicode_GET_LENGTH(value) != 0) {
            Py_INCREF(value);
            *out = value;
        }
        return ST_OK;
    }
    return PyUnicode_Check(value) ? ST_UNHANDLED : ST_OK; /* a str subclass: its own truth */
}

/* genai._first_str over two keys (a new reference, NULL for None). */
static int
first_str(PyObject *attributes, int key1, int key2, PyObject **out)
{
    int st = nonempty_str(attributes, key1, out);
    if (st == ST_OK && *out == NULL) {
        st = nonempty_str(attributes, key2, out);
    }
    return st;
}

/* genai._first_int over two keys, for values that are exact ints or absent or None (borrowed,
 * a new reference, NULL for None); another value would go through SpanView.get_int:
 * unhandled. */
static int
first_int(PyObject *attributes, int key1, int key2, PyObject **out)
{
    int keys[2] = {key1, key2}, k;
    *out = NULL;
    for (k = 0; k < 2; k++) {
        PyObject *value = attr_get(attributes, keys[k]);
        if (value == NULL) {
            if (PyErr_Occurred()) {
                return ST_ERROR;
            }
            continue;
        }
        if (PyLong_CheckExact(value)) {
            Py_INCREF(value);
            *out = value;
            return ST_OK;
        }
        if (value != Py_None) {
            return ST_UNHANDLED;
        }
    }
    return ST_OK;
}

/* A new reference to one of the strings. */
static PyObject *
new_str(int which)
{
    Py_INCREF(core_str[which]);
    return core_str[which];
}

/* Whether `operation` (an operation name, as OPERATION_MAP gives it) is core_str[which]. */
static int
is_operation(PyObject *operation, int which)
{
    return operation == core_str[which] ||
           (PyUnicode_CheckExact(operation) &&
            PyUnicode_Compare(operation, core_str[which]) == 0);
}

/* genai._operation (a new reference). */
static int
operation_of(PyObject *attributes, PyObject *operation_map, PyObject **out)
{
    PyObject *op = attr_get(attributes, K_OPERATION_NAME);
    int k;
    static const int implies[] = {K_TOOL_NAME, K_INPUT_MESSAGES, K_OUTPUT_MESSAGES,
                                  K_REQUEST_MODEL};
    static const int gives[] = {O_TOOL, O_LLM, O_LLM, O_LLM};

    *out = NULL;
    if (op == NULL && PyErr_Occurred()) {
        return ST_ERROR;
    }
    if (op != NULL && PyUnicode_Check(op)) {
        if (!PyUnicode_CheckExact(op)) {
            return ST_UNHANDLED; /* a str subclass: its own hash and truth */
        }
        *out = PyDict_GetItemWithError(operation_map, op);
        if (*out != NULL) {
            Py_INCREF(*out);
            return ST_OK;
        }
        if (PyErr_Occurred()) {
            return ST_ERROR;
        }
        if (PyUnicode_GET_LENGTH(op) != 0) {
            *out = new_str(O_OTHER);
            return ST_OK;
        }
    }
    for (k = 0; k < 4; k++) {
        int has = PyDict_Contains(attributes, core_str[implies[k]]);
        if (has < 0) {
            return ST_ERROR;
        }
        if (has) {
            *out = new_str(gives[k]);
            return ST_OK;
        }
    }
    *out = new_str(O_OTHER);
    return ST_OK;
}

/* genai.finish_reasons_of(value) for a list of exact str and None, or any non-list non-str
 * (a new reference). */
static int
finish_reasons_of(PyObject *value, PyObject **out)
{
    Py_ssize_t i;
    *out = NULL;
    if (PyList_CheckExact(value)) {
        PyObject *list = PyList_New(0);
        if (list == NULL) {
            return ST_ERROR;
        }
        for (i = 0; i < PyList_GET_SIZE(value); i++) {
            PyObject *item = PyList_GET_ITEM(value, i);
            if (item == Py_None) {
                continue;
            }
            if (!PyUnicode_CheckExact(item)) {
                Py_DECREF(list);
                return ST_UNHANDLED; /* str(item) */
            }
            if (PyList_Append(list, item) < 0) {
                Py_DECREF(list);
                return ST_ERROR;
            }
        }
        *out = list;
        return ST_OK;
    }
    if (PyList_Check(value) || (PyUnicode_Check(value) && !PyUnicode_CheckExact(value))) {
        return ST_UNHANDLED;
    }
    if (PyUnicode_CheckExact(value) && PyUnicode_GET_LENGTH(value) != 0) {
        *out = PyList_New(1);
        if (*out == NULL) {
            return ST_ERROR;
        }
        Py_INCREF(value);
        PyList_SET_ITEM(*out, 0, value);
        return ST_OK;
    }
    *out = PyList_New(0);
    return *out != NULL ? ST_OK : ST_ERROR;
}

/* _messages.parse_messages(value) when it records no problem and the C paths build it: a JSON
 * str (json_loads) or a list, converted by convert_messages (a new reference). */
static int
parse_messages(PyObject *module, PyObject *value, const tracehound_wire_str *located,
               PyObject *part_type, PyObject *message_type, Py_ssize_t max_json, PyObject *memo,
               PyObject **out)
{
    PyObject *data, *decoded = NULL;
    *out = NULL;
    if (located != NULL && located->ptr != NULL) { /* the str's UTF-8, left on the wire */
        /* its length in characters is at most its length in bytes; past the limit in bytes,
         * the Python code decides */
        if (located->len > max_json) {
            return ST_UNHANDLED;
        }
        *out = tracehound_messages_from_utf8(module, (const char *)located->ptr, located->len,
                                             part_type, message_type, memo);
        if (*out == Py_None) {
            Py_CLEAR(*out);
            return ST_UNHANDLED;
        }
        return *out != NULL ? ST_OK : ST_ERROR;
    }
    if (value == Py_None) {
        *out = PyList_New(0);
        return *out != NULL ? ST_OK : ST_ERROR;
    }
    if (PyUnicode_CheckExact(value)) {
        if (PyUnicode_GET_LENGTH(value) > max_json) {
            return ST_UNHANDLED; /* a problem */
        }
        if (memo != Py_None) { /* the messages the trace's last input already had: reused */
            *out = tracehound_messages_from_json(module, value, part_type, message_type, memo);
            if (*out == Py_None) {
                Py_CLEAR(*out);
                return ST_UNHANDLED;
            }
            return *out != NULL ? ST_OK : ST_ERROR;
        }
        decoded = tracehound_json_loads(module, value);
        if (decoded == NULL) {
            return ST_ERROR;
        }
        if (decoded == Py_None) {
            Py_DECREF(decoded);
            return ST_UNHANDLED; /* json.loads decides */
        }
        data = PyTuple_GET_ITEM(decoded, 0);
    }
    else if (PyList_CheckExact(value)) {
        data = value;
    }
    else {
        return ST_UNHANDLED;
    }
    *out = tracehound_convert_messages(module, data, part_type, message_type);
    Py_XDECREF(decoded);
    if (*out == NULL) {
        return ST_ERROR;
    }
    if (*out == Py_None) {
        Py_CLEAR(*out);
        return ST_UNHANDLED;
    }
    return ST_OK;
}

/* [m.finish_reason for m in messages if m.finish_reason], for finish reasons that are None
 * or non-empty exact str (what convert_messages makes). */
static int
output_finish_reasons(PyObject *messages, PyObject **out)
{
    Py_ssize_t i;
    PyObject *list = PyList_New(0);
    *out = NULL;
    if (list == NULL) {
        return ST_ERROR;
    }
    for (i = 0; i < PyList_GET_SIZE(messages); i++) {
        PyObject *reason = core_get(PyList_GET_ITEM(messages, i), F_FINISH_REASON);
        int st = ST_OK;
        if (reason == NULL) {
            st = ST_ERROR;
        }
        else if (PyUnicode_CheckExact(reason)) {
            if (PyUnicode_GET_LENGTH(reason) != 0 && PyList_Append(list, reason) < 0) {
                st = ST_ERROR;
            }
        }
        else if (reason != Py_None) {
            st = ST_UNHANDLED;
        }
        Py_XDECREF(reason);
        if (st != ST_OK) {
            Py_DECREF(list);
            return st;
        }
    }
    *out = list;
    return ST_OK;
}

/* The fields extract sets, by index in FIELDS below. */
enum {
    X_AGENT_NAME,
    X_MODEL,
    X_PROVIDER,
    X_INPUT_TOKENS,
    X_OUTPUT_TOKENS,
    X_FINISH_REASONS,
    X_INPUT_MESSAGES,
    X_OUTPUT_MESSAGES,
    X_TOOL_NAME,
    X_TOOL_CALL_ID,
    X_TOOL_ARGUMENTS,
    X_TOOL_RESULT,
    X_COUNT
};
static const int FIELDS[X_COUNT] = {
    F_AGENT_NAME,   F_MODEL,          F_PROVIDER,        F_INPUT_TOKENS,
    F_OUTPUT_TOKENS, F_FINISH_REASONS, F_INPUT_MESSAGES, F_OUTPUT_MESSAGES,
    F_TOOL_NAME,    F_TOOL_CALL_ID,   F_TOOL_ARGUMENTS,  F_TOOL_RESULT,
};

/* span.error = genai.error_of(view): None, without a call, for a span with no true
 * `error.type` whose status is not ERROR (2); else by calling error_of. */
static int
set_error(PyObject *view, PyObject *attributes, PyObject *error_of, PyObject *span)
{
    PyObject *error_type = attr_get(attributes, K_ERROR_TYPE), *code, *error;
    int is_error = -1, rc;

    if (error_type == NULL && PyErr_Occurred()) {
        return ST_ERROR;
    }
    if (error_type == NULL || error_type == Py_None ||
        (PyUnicode_CheckExact(error_type) && PyUnicode_GET_LENGTH(error_type) == 0)) {
        code = PyObject_GetAttr(view, core_str[F_STATUS_CODE]); /* what is_error compares */
        if (code == NULL) {
            return ST_ERROR;
        }
        if (PyLong_CheckExact(code)) {
            long value = PyLong_AsLong(code);
            if (value == -1 && PyErr_Occurred()) {
                PyErr_Clear(); /* a huge code: not ERROR */
                value = 0;
            }
            is_error = value == 2;
        }
        Py_DECREF(code);
        if (is_error == 0) {
            return ST_OK; /* None: the field's default */
        }
    }
    error = PyObject_CallOneArg(error_of, view);
    if (error == NULL) {
        return ST_ERROR;
    }
    rc = tracehound_slot_set(&core_slots[F_ERROR], span, core_str[F_ERROR], error);
    Py_DECREF(error);
    return rc < 0 ? ST_ERROR : ST_OK;
}

PyDoc_STRVAR(genai_extract_doc,
"genai_extract($module, view, attributes, config, memo=None, /)\n"
"--\n"
"\n"
"tracehound.conventions.genai.extract(view, []): `attributes` is view.attributes, `config`\n"
"the tuple (NormalizedSpan, Part, Message, OPERATION_MAP, NAME, LEGACY_NAME, MAX_JSON_BYTES,\n"
"error_of). The span is made by calling NormalizedSpan(view, convention, operation), its\n"
"other fields set as setattr sets them; error_of(view) is called for a span whose status is\n"
"ERROR or that has an `error.type`. `memo`, a list [text, messages, end offsets] kept per\n"
"trace (first [None, None, None]), holds the last input messages converted: an input that\n"
"starts with the same messages (chat spans resend the conversation) reuses those objects\n"
"rather than decoding them again, and the memo is updated.\n"
"\n"
"None, with nothing made, for what the Python code would map with a problem or through\n"
"another conversion than the C paths': attributes not an exact dict, system instructions,\n"
"a retrieval span, messages that json_loads and convert_messages do not take, token counts\n"
"other than int or None, str subclasses, finish reasons other than str or None.");

/* The span's lists of strings (finish reasons, system instructions; messages, history,
 * documents and problems when empty) taken out of the cycle collector, as convert_messages does
 * with the message lists it makes: what the code that maps spans puts in them (strings,
 * messages, documents) can be in no reference cycle. Tracked, they would be walked by every
 * collection for as long as their trace is held: with a trace's spans held until it ends, most
 * of the collector's work. */
static int
untrack_string_lists(PyObject *span)
{
    static const int fields[] = {F_FINISH_REASONS,  F_SYSTEM_INSTRUCTIONS, F_INPUT_MESSAGES,
                                 F_OUTPUT_MESSAGES, F_HISTORY,             F_DOCUMENTS,
                                 F_PROBLEMS};
    size_t k;
    for (k = 0; k < sizeof(fields) / sizeof(fields[0]); k++) {
        PyObject *list = core_get(span, fields[k]);
        Py_ssize_t i;
        int strings = 1;
        if (list == NULL) {
            return ST_ERROR;
        }
        if (PyList_CheckExact(list) && PyObject_GC_IsTracked(list)) {
            for (i = 0; i < PyList_GET_SIZE(list) && strings; i++) {
                strings = PyUnicode_CheckExact(PyList_GET_ITEM(list, i));
            }
            if (strings) {
                PyObject_GC_UnTrack(list);
            }
        }
        Py_DECREF(list);
    }
    return ST_OK;
}

/* genai_extract's arguments checked: 0, or -1 with TypeError set. */
static int
check_extract_args(PyObject *config, PyObject *memo, const char *fname)
{
    if (memo != Py_None && (!PyList_CheckExact(memo) || PyList_GET_SIZE(memo) != 3)) {
        PyErr_Format(PyExc_TypeError, "%s(): memo is None or a list of 3", fname);
        return -1;
    }
    if (!PyTuple_CheckExact(config) || PyTuple_GET_SIZE(config) != 8 ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(config, 3))) {
        PyErr_Format(PyExc_TypeError, "%s(): config is a tuple of 8, see genai_extract",
                     fname);
        return -1;
    }
    return 0;
}

/* genai_extract's mapping (a new reference in *out when ST_OK). `located`, when not NULL,
 * holds the input and output messages' str values left on the wire (`attributes` has None
 * for them), read from their UTF-8. */
static int
extract_span(PyObject *module, PyObject *view, PyObject *attributes, PyObject *config,
             PyObject *memo, const tracehound_wire_str *located, PyObject **out)
{
    PyObject *operation = NULL, *span = NULL, *value;
    PyObject *values[X_COUNT] = {NULL};
    PyObject *call_args[4];
    Py_ssize_t max_json;
    int legacy, has, st = ST_OK, k;

    *out = NULL;
    max_json = PyLong_AsSsize_t(PyTuple_GET_ITEM(config, 6));
    if (max_json == -1 && PyErr_Occurred()) {
        return ST_ERROR;
    }
    /* `legacy = provider.name not in attrs and system in attrs` */
    has = PyDict_Contains(attributes, core_str[K_PROVIDER_NAME]);
    legacy = has == 0 ? PyDict_Contains(attributes, core_str[K_SYSTEM]) : 0;
    if (has < 0 || legacy < 0) {
        return ST_ERROR;
    }
    st = operation_of(attributes, PyTuple_GET_ITEM(config, 3), &operation);
    if (st == ST_OK) {
        if (is_operation(operation, O_RETRIEVAL)) {
            st = ST_UNHANDLED; /* query, source, documents: the Python code */
        }
        else if ((has = PyDict_Contains(attributes, core_str[K_SYSTEM_INSTRUCTIONS])) != 0) {
            st = has < 0 ? ST_ERROR : ST_UNHANDLED;
        }
    }
    if (st == ST_OK) {
        st = nonempty_str(attributes, K_AGENT_NAME, &values[X_AGENT_NAME]);
    }
    if (st == ST_OK) {
        st = first_str(attributes, K_REQUEST_MODEL, K_RESPONSE_MODEL, &values[X_MODEL]);
    }
    if (st == ST_OK) {
        st = first_str(attributes, K_PROVIDER_NAME, K_SYSTEM, &values[X_PROVIDER]);
    }
    if (st == ST_OK) {
        st = first_int(attributes, K_INPUT_TOKENS, K_PROMPT_TOKENS, &values[X_INPUT_TOKENS]);
    }
    if (st == ST_OK) {
        st = first_int(attributes, K_OUTPUT_TOKENS, K_COMPLETION_TOKENS,
                       &values[X_OUTPUT_TOKENS]);
    }
    if (st == ST_OK && is_operation(operation, O_TOOL)) {
        st = nonempty_str(attributes, K_TOOL_NAME, &values[X_TOOL_NAME]);
        if (st == ST_OK) {
            st = nonempty_str(attributes, K_TOOL_CALL_ID, &values[X_TOOL_CALL_ID]);
        }
        if (st == ST_OK) {
            /* `attributes.get(key)`: None when absent, which is the field's default */
            values[X_TOOL_ARGUMENTS] = attr_get(attributes, K_TOOL_CALL_ARGUMENTS);
            Py_XINCREF(values[X_TOOL_ARGUMENTS]);
            values[X_TOOL_RESULT] = attr_get(attributes, K_TOOL_CALL_RESULT);
            Py_XINCREF(values[X_TOOL_RESULT]);
            if (PyErr_Occurred()) {
                st = ST_ERROR;
            }
        }
    }
    if (st == ST_OK && (value = attr_get(attributes, K_FINISH_REASONS)) != NULL &&
        value != Py_None) {
        Py_INCREF(value);
        st = finish_reasons_of(value, &values[X_FINISH_REASONS]);
        Py_DECREF(value);
    }
    if (st == ST_OK && PyErr_Occurred()) {
        st = ST_ERROR;
    }
    for (k = 0; k < 2 && st == ST_OK; k++) {
        int key = k == 0 ? K_INPUT_MESSAGES : K_OUTPUT_MESSAGES;
        value = attr_get(attributes, key);
        if (value != NULL) {
            Py_INCREF(value);
            st = parse_messages(module, value, located != NULL ? &located[k] : NULL,
                                PyTuple_GET_ITEM(config, 1), PyTuple_GET_ITEM(config, 2),
                                max_json, k == 0 ? memo : Py_None,
                                &values[X_INPUT_MESSAGES + k]);
            Py_DECREF(value);
        }
        else if (PyErr_Occurred()) {
            st = ST_ERROR;
        }
    }
    if (st == ST_OK && values[X_OUTPUT_MESSAGES] != NULL &&
        PyList_GET_SIZE(values[X_OUTPUT_MESSAGES]) != 0 &&
        (values[X_FINISH_REASONS] == NULL || PyList_GET_SIZE(values[X_FINISH_REASONS]) == 0)) {
        Py_CLEAR(values[X_FINISH_REASONS]);
        st = output_finish_reasons(values[X_OUTPUT_MESSAGES], &values[X_FINISH_REASONS]);
    }
    if (st == ST_OK) {
        call_args[0] = NULL;
        call_args[1] = view;
        call_args[2] = PyTuple_GET_ITEM(config, legacy ? 5 : 4);
        call_args[3] = operation;
        span = PyObject_Vectorcall(PyTuple_GET_ITEM(config, 0), call_args + 1,
                                   3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (span == NULL) {
            st = ST_ERROR;
        }
    }
    if (st == ST_OK) {
        st = set_error(view, attributes, PyTuple_GET_ITEM(config, 7), span);
    }
    for (k = 0; st == ST_OK && k < X_COUNT; k++) {
        if (values[k] != NULL && tracehound_slot_set(&core_slots[FIELDS[k]], span,
                                                     core_str[FIELDS[k]], values[k]) < 0) {
            st = ST_ERROR;
        }
    }
    for (k = 0; k < X_COUNT; k++) {
        Py_XDECREF(values[k]);
    }
    Py_XDECREF(operation);
    if (st == ST_OK) {
        st = untrack_string_lists(span);
    }
    if (st == ST_OK) {
        *out = span;
    }
    else {
        Py_XDECREF(span);
    }
    return st;
}

static PyObject *
genai_extract(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *memo, *span;
    int st;

    if (nargs != 3 && nargs != 4) {
        PyErr_Format(PyExc_TypeError, "genai_extract() takes 3 or 4 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    memo = nargs == 4 ? args[3] : Py_None;
    if (check_extract_args(args[2], memo, "genai_extract") < 0) {
        return NULL;
    }
    if (!PyDict_CheckExact(args[1])) {
        Py_RETURN_NONE;
    }
    st = extract_span(module, args[0], args[1], args[2], memo, NULL, &span);
    if (st == ST_OK) {
        return span;
    }
    if (st == ST_ERROR) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* --- genai_normalize ------------------------------------------------------------------------- */

/* obj's slot `which` as it is (borrowed; NULL when unset), *is_slot 0 when obj's class has no
 * such slot. */
static PyObject *
slot_peek(PyObject *obj, int which, int *is_slot)
{
    Py_ssize_t offset = cached_offset(&core_slots[which], obj, core_str[which]);
    *is_slot = offset != 0;
    return offset != 0 ? *(PyObject **)((char *)obj + offset) : NULL;
}

/* The attributes whose str values normalization leaves on the wire: the messages, which only
 * the mapping reads (and reads from their UTF-8). In the order of `located`. */
static const char *const LAZY_KEYS[2] = {"gen_ai.input.messages", "gen_ai.output.messages"};

/* Answers of `key in keys` for exact str keys and frozensets, by identity of both (held, so
 * neither address is reused while cached): the attribute keys are the same few string objects
 * span after span (the decoder's key cache hands them out), asked about the same two sets. */
#define KEY_IN_CACHE_SIZE 256 /* a power of 2 */
static struct {
    PyObject *key, *keys;
    int has;
} key_in_cache[KEY_IN_CACHE_SIZE];

/* `key in keys`: 1, 0, or -1 with an exception set. */
static int
key_in(PyObject *key, PyObject *keys)
{
    size_t slot;
    int has;
    if (!PyUnicode_CheckExact(key) || !PyFrozenSet_CheckExact(keys)) {
        return PySet_Contains(keys, key);
    }
    slot = (((uintptr_t)key >> 4) ^ ((uintptr_t)keys >> 6)) & (KEY_IN_CACHE_SIZE - 1);
    if (key_in_cache[slot].key == key && key_in_cache[slot].keys == keys) {
        return key_in_cache[slot].has;
    }
    has = PySet_Contains(keys, key);
    if (has >= 0) {
        PyObject *old_key = key_in_cache[slot].key, *old_keys = key_in_cache[slot].keys;
        key_in_cache[slot].key = Py_NewRef(key);
        key_in_cache[slot].keys = Py_NewRef(keys);
        key_in_cache[slot].has = has;
        Py_XDECREF(old_key);
        Py_XDECREF(old_keys);
    }
    return has;
}

/* Whether a key of `attributes` is in the set `keys`: 1, 0, or -1 with an exception set. */
static int
any_key_in(PyObject *attributes, PyObject *keys)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(attributes, &pos, &key, &value)) {
        int has = key_in(key, keys);
        if (has != 0) {
            return has;
        }
    }
    return 0;
}

/* The view's request bytes and its range in them, from its `_wire_at` (borrowed). */
static int
wire_range(PyObject *wire_at, const uint8_t **p, const uint8_t **end, PyObject **data)
{
    Py_ssize_t start, stop;
    if (wire_at == NULL || !PyTuple_CheckExact(wire_at) || PyTuple_GET_SIZE(wire_at) != 3 ||
        !PyBytes_CheckExact(PyTuple_GET_ITEM(wire_at, 0)) ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(wire_at, 1)) ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(wire_at, 2))) {
        return ST_UNHANDLED;
    }
    *data = PyTuple_GET_ITEM(wire_at, 0);
    start = PyLong_AsSsize_t(PyTuple_GET_ITEM(wire_at, 1));
    stop = PyLong_AsSsize_t(PyTuple_GET_ITEM(wire_at, 2));
    if ((start == -1 || stop == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        return ST_UNHANDLED;
    }
    if (start < 0 || start > stop || stop > PyBytes_GET_SIZE(*data)) {
        return ST_UNHANDLED;
    }
    *p = (const uint8_t *)PyBytes_AS_STRING(*data) + start;
    *end = (const uint8_t *)PyBytes_AS_STRING(*data) + stop;
    return ST_OK;
}

/* view.<slot> = value (a new reference, consumed) when the slot holds None or nothing. */
static int
fill_slot(PyObject *view, int which, PyObject *value)
{
    int is_slot, rc;
    PyObject *now = slot_peek(view, which, &is_slot);
    if (value == NULL) {
        return -1;
    }
    rc = 0;
    if (is_slot && (now == NULL || now == Py_None)) {
        rc = tracehound_slot_set(&core_slots[which], view, core_str[which], value);
    }
    Py_DECREF(value);
    return rc;
}

/* The view's lazy times and status read from its bytes, as its properties would read them
 * through upb from the span parsed from those bytes (`_wire_at` is where the span lies). */
static int
fill_times_and_status(PyObject *view, const uint8_t *p, const uint8_t *end)
{
    tracehound_span_fields fields;
    int is_slot;
    PyObject *code;
    if (tracehound_span_fields_of(p, end, &fields) != ST_OK) {
        return 0; /* left to the properties */
    }
    if (fill_slot(view, V_START, PyLong_FromUnsignedLongLong(fields.start)) < 0 ||
        fill_slot(view, V_END, PyLong_FromUnsignedLongLong(fields.end)) < 0) {
        return -1;
    }
    code = slot_peek(view, V_STATUS_CODE, &is_slot);
    if (is_slot && (code == NULL || code == Py_None)) { /* code and message, set together */
        PyObject *message;
        if (fields.has_message) {
            message = PyUnicode_DecodeUTF8((const char *)fields.message.ptr,
                                           fields.message.len, NULL);
            if (message == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                    return -1;
                }
                PyErr_Clear();
                return 0; /* upb refuses it: left to the property */
            }
        }
        else {
            message = PyUnicode_New(0, 0);
        }
        if (fill_slot(view, V_STATUS_MESSAGE, message) < 0 ||
            fill_slot(view, V_STATUS_CODE, PyLong_FromLong(fields.code)) < 0) {
            return -1;
        }
    }
    return 0;
}

/* What SpanView.attributes completes the attributes from: (attributes, key, start, end, ...)
 * for the strings left on the wire (offsets into the request's bytes). */
static PyObject *
pending_attributes(PyObject *attributes, PyObject *data, const tracehound_wire_str *located)
{
    PyObject *pending, *items[1 + 3 * 2];
    const char *base = PyBytes_AS_STRING(data);
    Py_ssize_t n = 0, k, i;
    items[n++] = Py_NewRef(attributes);
    for (k = 0; k < 2; k++) {
        Py_ssize_t start;
        if (located[k].ptr == NULL) {
            continue;
        }
        start = (const char *)located[k].ptr - base;
        items[n++] = new_str(k == 0 ? K_INPUT_MESSAGES : K_OUTPUT_MESSAGES);
        items[n++] = PyLong_FromSsize_t(start);
        items[n++] = PyLong_FromSsize_t(start + located[k].len);
    }
    pending = PyTuple_New(n);
    for (i = 0; i < n; i++) {
        if (pending == NULL || items[i] == NULL) {
            Py_XDECREF(items[i]);
            Py_CLEAR(pending);
            continue;
        }
        PyTuple_SET_ITEM(pending, i, items[i]);
    }
    if (pending == NULL && !PyErr_Occurred()) {
        PyErr_NoMemory();
    }
    return pending;
}

PyDoc_STRVAR(genai_normalize_doc,
"genai_normalize($module, view, config, memo, /)\n"
"--\n"
"\n"
"tracehound.conventions.normalize(view, None, memo) for the usual OTel GenAI span, decided\n"
"and mapped in one call: a SpanView whose name the name memo marks as an OTel GenAI\n"
"operation's alone, of another scope than pydantic-ai's and not named like a pydantic-ai span,\n"
"without span events, whose attributes hold no key another convention claims and a key OTel\n"
"GenAI detects. `config` is (genai_extract's config, the name memo, its mark of those names,\n"
"the keys other conventions claim, OTel GenAI's detection keys, pydantic-ai's span names,\n"
"pydantic-ai's scope name).\n"
"\n"
"A view located in its request's bytes whose attributes were not decoded yet is read from\n"
"those bytes, its messages straight from their UTF-8 (see genai_extract): their str values are\n"
"decoded only when SpanView.attributes is asked for, from what the view keeps (its `_pending`\n"
"slot: the other attributes decoded, and where those strings lie).\n"
"\n"
"None, with nothing changed, for anything else: the Python code then decides and maps.");

static PyObject *
genai_normalize(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *view, *config, *memo, *extract_config, *name, *scope_name, *flags, *value;
    PyObject *attributes = NULL, *data = NULL, *span = NULL;
    tracehound_wire_str located[2];
    const uint8_t *p, *end;
    int is_slot, has_events = 0, walked = 0, st, has;

    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "genai_normalize() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    view = args[0];
    config = args[1];
    memo = args[2];
    if (!PyTuple_CheckExact(config) || PyTuple_GET_SIZE(config) != 7 ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(config, 1)) ||
        !PyAnySet_Check(PyTuple_GET_ITEM(config, 3)) ||
        !PyAnySet_Check(PyTuple_GET_ITEM(config, 4)) ||
        !PyAnySet_Check(PyTuple_GET_ITEM(config, 5))) {
        PyErr_SetString(PyExc_TypeError, "genai_normalize(): config is a tuple of 7, see its doc");
        return NULL;
    }
    extract_config = PyTuple_GET_ITEM(config, 0);
    if (check_extract_args(extract_config, memo, "genai_normalize") < 0) {
        return NULL;
    }
    /* detect_convention: the name alone says "an OTel GenAI operation" (memoized before) */
    name = slot_peek(view, V_NAME, &is_slot);
    scope_name = slot_peek(view, V_SCOPE_NAME, &is_slot);
    if (name == NULL || scope_name == NULL || !PyUnicode_CheckExact(name) ||
        !PyUnicode_CheckExact(scope_name)) {
        goto unhandled;
    }
    flags = PyDict_GetItemWithError(PyTuple_GET_ITEM(config, 1), name);
    if (flags == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        goto unhandled;
    }
    if (!PyLong_CheckExact(flags) ||
        PyObject_RichCompareBool(flags, PyTuple_GET_ITEM(config, 2), Py_EQ) != 1 ||
        PyUnicode_Compare(scope_name, PyTuple_GET_ITEM(config, 6)) == 0) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        goto unhandled;
    }
    has = PySet_Contains(PyTuple_GET_ITEM(config, 5), name);
    if (has != 0) {
        if (has < 0) {
            return NULL;
        }
        goto unhandled;
    }
    /* the attributes: as decoded, or from the bytes */
    value = slot_peek(view, V_ATTRIBUTES, &is_slot);
    if (value != NULL && PyDict_CheckExact(value)) {
        attributes = Py_NewRef(value);
    }
    else if (is_slot && (value == NULL || value == Py_None)) {
        st = wire_range(slot_peek(view, V_WIRE_AT, &is_slot), &p, &end, &data);
        if (st != ST_OK) {
            goto unhandled;
        }
        st = tracehound_span_attributes(module, p, end, 2, LAZY_KEYS, located, &has_events,
                                        &attributes);
        if (st != ST_OK) {
            if (st == ST_ERROR) {
                return NULL;
            }
            goto unhandled;
        }
        walked = 1;
    }
    else {
        goto unhandled;
    }
    /* `not view.has_event("db.query.result")`: a view with no events at all */
    value = slot_peek(view, V_EVENTS, &is_slot);
    if (value != NULL && PyList_CheckExact(value)) {
        if (PyList_GET_SIZE(value) != 0) {
            goto unhandled;
        }
    }
    else if (!walked || has_events || (value != NULL && value != Py_None)) {
        goto unhandled;
    }
    /* no key another convention claims; a key OTel GenAI detects */
    has = any_key_in(attributes, PyTuple_GET_ITEM(config, 3));
    if (has == 0) {
        has = any_key_in(attributes, PyTuple_GET_ITEM(config, 4));
        if (has == 0) {
            goto unhandled;
        }
    }
    else if (has > 0) {
        goto unhandled;
    }
    if (has < 0) {
        Py_DECREF(attributes);
        return NULL;
    }
    if (walked && fill_times_and_status(view, p, end) < 0) {
        Py_DECREF(attributes);
        return NULL;
    }
    st = extract_span(module, view, attributes, extract_config, memo, walked ? located : NULL,
                      &span);
    if (st == ST_OK && walked) {
        /* what the view's attributes are made of when asked (unless error_of read them) */
        value = slot_peek(view, V_ATTRIBUTES, &is_slot);
        if (value == NULL || value == Py_None) {
            if (located[0].ptr == NULL && located[1].ptr == NULL) {
                st = tracehound_slot_set(&core_slots[V_ATTRIBUTES], view,
                                         core_str[V_ATTRIBUTES], attributes) < 0
                         ? ST_ERROR
                         : ST_OK;
            }
            else {
                PyObject *pending = pending_attributes(attributes, data, located);
                st = pending == NULL || tracehound_slot_set(&core_slots[V_PENDING], view,
                                                            core_str[V_PENDING], pending) < 0
                         ? ST_ERROR
                         : ST_OK;
                Py_XDECREF(pending);
            }
        }
    }
    Py_DECREF(attributes);
    if (st == ST_OK) {
        return span;
    }
    Py_XDECREF(span);
    if (st == ST_ERROR) {
        return NULL;
    }
    Py_RETURN_NONE;
unhandled:
    Py_XDECREF(attributes);
    Py_RETURN_NONE;
}

/* --- module ---------------------------------------------------------------------------------- */

static PyMethodDef core_methods[] = {
    {"text_size", text_size, METH_O, text_size_doc},
    {"genai_extract", (PyCFunction)(void (*)(void))genai_extract, METH_FASTCALL,
     genai_extract_doc},
    {"genai_normalize", (PyCFunction)(void (*)(void))genai_normalize, METH_FASTCALL,
     genai_normalize_doc},
    {NULL, NULL, 0, NULL},
};

int
tracehound_add_core(PyObject *module)
{
    PyObject *type;
    int i;

    for (i = 0; i < C_COUNT; i++) {
        if (core_str[i] == NULL) {
            core_str[i] = PyUnicode_InternFromString(CORE_STRING[i]);
            if (core_str[i] == NULL) {
                return -1;
            }
        }
    }
    type = PyType_FromModuleAndSpec(module, &maker_spec, NULL);
    if (type == NULL) {
        return -1;
    }
    if (PyModule_AddObject(module, "SlotsMaker", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    type = PyType_FromModuleAndSpec(module, &slotprop_spec, NULL);
    if (type == NULL) {
        return -1;
    }
    if (PyModule_AddObject(module, "SlotProperty", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return PyModule_AddFunctions(module, core_methods);
}
