/* The bus client's hot path in C (issue 34): ZeroMQ frames in and out, the HMAC, the decoder's
 * regular case, a validated body's model, and a published envelope's msgpack.
 *
 * What the Python paths paid per message and this does not: a pyzmq Frame object per received
 * frame (three per message) with its `.bytes` copy and `.more` lookup, pyzmq's Python-level send
 * wrapper per sent frame, four hashlib objects (two copies, two digests) per MAC, the decoder's
 * and the converter's Python steps, and the publisher's wire map. The wire, the MAC and every
 * decision about a frame are unchanged: whatever is not the regular case goes back to Python.
 *
 * libzmq is the one pyzmq already loaded (its wheel bundles it): `bind` finds its symbols with
 * dlopen(RTLD_NOLOAD), so both drive the same sockets through the same library. The sockets are
 * pyzmq's, passed as `Socket.underlying` handles, and used under the same rule as before (one
 * thread at a time: the SUB on the loop thread, the PUB under the client's send lock). Nothing here
 * blocks: receives are non-blocking and a PUB socket's send never waits (it drops at its HWM).
 *
 * The MAC is RFC 2104 HMAC-SHA256 over u16be(len(topic)) + topic + payload (protocol/signing.py
 * states the construction; its pure-Python Signer is the reference the tests compare against),
 * with the key's inner and outer pads hashed once per key. SHA-256 is OpenSSL's (it uses the CPU's
 * SHA instructions where present); the comparison is constant time (CRYPTO_memcmp).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <structmember.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

/* The functions and types below, as protocol/accel.py calls them; raised on any change to them */
#define WIRE_ABI 1

/* libzmq's public ABI (zmq.h, stable since 4.0): the message is 64 bytes, pointer-aligned */
typedef struct { unsigned char _[64]; } __attribute__((aligned(sizeof(void *)))) zmq_msg_t;
#define ZMQ_DONTWAIT 1
#define ZMQ_SNDMORE 2

static int (*z_msg_init)(zmq_msg_t *);
static int (*z_msg_recv)(zmq_msg_t *, void *, int);
static void *(*z_msg_data)(zmq_msg_t *);
static size_t (*z_msg_size)(const zmq_msg_t *);
static int (*z_msg_more)(const zmq_msg_t *);
static int (*z_msg_close)(zmq_msg_t *);
static int (*z_send)(void *, const void *, size_t, int);
static int (*z_errno)(void);
static int bound = 0;

static PyObject *
wire_bind(PyObject *self, PyObject *arg)
{
    const char *path = PyUnicode_AsUTF8(arg);
    if (path == NULL)
        return NULL;
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);   /* only the copy already loaded */
    if (lib == NULL) {
        PyErr_Format(PyExc_OSError, "libzmq not loaded from %s: %s", path, dlerror());
        return NULL;
    }
#define SYM(var, name) \
    if ((*(void **)&var = dlsym(lib, name)) == NULL) { \
        PyErr_Format(PyExc_OSError, "%s: no symbol %s", path, name); return NULL; }
    SYM(z_msg_init, "zmq_msg_init")
    SYM(z_msg_recv, "zmq_msg_recv")
    SYM(z_msg_data, "zmq_msg_data")
    SYM(z_msg_size, "zmq_msg_size")
    SYM(z_msg_more, "zmq_msg_more")
    SYM(z_msg_close, "zmq_msg_close")
    SYM(z_send, "zmq_send")
    SYM(z_errno, "zmq_errno")
#undef SYM
    bound = 1;   /* the handle stays open: libzmq is never unloaded while pyzmq is imported */
    Py_RETURN_NONE;
}

static int
need_bound(void)
{
    if (!bound) {
        PyErr_SetString(PyExc_RuntimeError, "protocol._wire: bind() was not called");
        return 0;
    }
    return 1;
}

static PyObject *
zmq_error(void)
{
    int err = z_errno();
    errno = err;
    return PyErr_SetFromErrno(PyExc_OSError);
}

/* recv(handle) -> list of bytes (every frame of the next message), or None when none is queued */
static PyObject *
wire_recv(PyObject *self, PyObject *arg)
{
    if (!need_bound())
        return NULL;
    void *sock = PyLong_AsVoidPtr(arg);
    if (sock == NULL)
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "null socket");
    PyObject *frames = NULL;
    zmq_msg_t msg;
    for (;;) {
        z_msg_init(&msg);
        int rc;
        do {
            rc = z_msg_recv(&msg, sock, ZMQ_DONTWAIT);
        } while (rc < 0 && z_errno() == EINTR);
        if (rc < 0) {
            int err = z_errno();
            z_msg_close(&msg);
            if (err == EAGAIN && frames == NULL)
                Py_RETURN_NONE;
            if (err == EAGAIN)   /* a message's frames arrive together: a cut message is kept
                                    as far as it came, and the decoder refuses its frame count */
                return frames;
            Py_XDECREF(frames);
            errno = err;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        PyObject *frame = PyBytes_FromStringAndSize((const char *)z_msg_data(&msg),
                                                    (Py_ssize_t)z_msg_size(&msg));
        int more = z_msg_more(&msg);
        z_msg_close(&msg);
        if (frame == NULL) {
            Py_XDECREF(frames);
            return NULL;
        }
        if (frames == NULL) {
            frames = PyList_New(1);
            if (frames == NULL) {
                Py_DECREF(frame);
                return NULL;
            }
            PyList_SET_ITEM(frames, 0, frame);
        } else {
            int bad = PyList_Append(frames, frame);
            Py_DECREF(frame);
            if (bad) {
                Py_DECREF(frames);
                return NULL;
            }
        }
        if (!more)
            return frames;
    }
}

/* send(handle, frames) -> None: one message of the given frames (a list or tuple of bytes) */
static PyObject *
wire_send(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "send(handle, frames)");
    if (!need_bound())
        return NULL;
    void *sock = PyLong_AsVoidPtr(args[0]);
    if (sock == NULL)
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "null socket");
    PyObject *seq = PySequence_Fast(args[1], "send: frames must be a list or tuple");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    if (n == 0) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "send: no frames");
    }
    for (Py_ssize_t i = 0; i < n; i++) {   /* all checked before the first frame leaves */
        if (!PyBytes_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "send: frame %zd is %s, not bytes", i,
                         Py_TYPE(items[i])->tp_name);
            Py_DECREF(seq);   /* after the message: the items may be the sequence's own */
            return NULL;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int rc;
        do {
            rc = z_send(sock, PyBytes_AS_STRING(items[i]), (size_t)PyBytes_GET_SIZE(items[i]),
                        ZMQ_DONTWAIT | (i + 1 < n ? ZMQ_SNDMORE : 0));
        } while (rc < 0 && z_errno() == EINTR);
        if (rc < 0) {
            Py_DECREF(seq);
            return zmq_error();
        }
    }
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

/* ---- HMAC-SHA256 -------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    SHA256_CTX inner;   /* state after the key's inner pad */
    SHA256_CTX outer;   /* state after the key's outer pad */
} MacObject;

static int
mac_init(MacObject *self, PyObject *args, PyObject *kwds)
{
    Py_buffer key;
    if (!PyArg_ParseTuple(args, "y*:Mac", &key))
        return -1;
    unsigned char block[64] = {0}, ipad[64], opad[64];
    if (key.len > 64)
        SHA256((const unsigned char *)key.buf, (size_t)key.len, block);
    else
        memcpy(block, key.buf, (size_t)key.len);
    PyBuffer_Release(&key);
    for (int i = 0; i < 64; i++) {
        ipad[i] = block[i] ^ 0x36;
        opad[i] = block[i] ^ 0x5C;
    }
    SHA256_Init(&self->inner);
    SHA256_Update(&self->inner, ipad, 64);
    SHA256_Init(&self->outer);
    SHA256_Update(&self->outer, opad, 64);
    OPENSSL_cleanse(block, sizeof block);
    OPENSSL_cleanse(ipad, sizeof ipad);
    OPENSSL_cleanse(opad, sizeof opad);
    return 0;
}

static void
mac_dealloc(MacObject *self)
{
    OPENSSL_cleanse(&self->inner, sizeof self->inner);
    OPENSSL_cleanse(&self->outer, sizeof self->outer);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The two buffers of a MAC call; bytes directly, any other bytes-like object through its buffer */
static int
get_buffer(PyObject *obj, Py_buffer *view, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be bytes-like, not %s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

static int
compute(MacObject *self, PyObject *topic_obj, PyObject *payload_obj, unsigned char out[32])
{
    Py_buffer topic, payload;
    if (get_buffer(topic_obj, &topic, "topic") < 0)
        return -1;
    if (topic.len > 0xFFFF) {
        PyBuffer_Release(&topic);
        PyErr_Format(PyExc_ValueError, "topic of %zd bytes: at most 65535", topic.len);
        return -1;
    }
    if (get_buffer(payload_obj, &payload, "payload") < 0) {
        PyBuffer_Release(&topic);
        return -1;
    }
    unsigned char len[2] = {(unsigned char)(topic.len >> 8), (unsigned char)(topic.len & 0xFF)};
    unsigned char digest[32];
    SHA256_CTX ctx = self->inner;
    SHA256_Update(&ctx, len, 2);
    SHA256_Update(&ctx, topic.buf, (size_t)topic.len);
    SHA256_Update(&ctx, payload.buf, (size_t)payload.len);
    SHA256_Final(digest, &ctx);
    ctx = self->outer;
    SHA256_Update(&ctx, digest, 32);
    SHA256_Final(out, &ctx);
    OPENSSL_cleanse(&ctx, sizeof ctx);
    PyBuffer_Release(&topic);
    PyBuffer_Release(&payload);
    return 0;
}

static PyObject *
mac_mac(MacObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "mac(topic, payload)");
    unsigned char out[32];
    if (compute(self, args[0], args[1], out) < 0)
        return NULL;
    return PyBytes_FromStringAndSize((const char *)out, 32);
}

static PyObject *
mac_sign(MacObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *mac = mac_mac(self, args, nargs);
    if (mac == NULL)
        return NULL;
    PyObject *frames = PyList_New(3);
    if (frames == NULL) {
        Py_DECREF(mac);
        return NULL;
    }
    Py_INCREF(args[0]);
    Py_INCREF(args[1]);
    PyList_SET_ITEM(frames, 0, args[0]);
    PyList_SET_ITEM(frames, 1, args[1]);
    PyList_SET_ITEM(frames, 2, mac);
    return frames;
}

static PyObject *
mac_verify(MacObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3)
        return PyErr_Format(PyExc_TypeError, "verify(topic, payload, mac)");
    unsigned char out[32];
    if (compute(self, args[0], args[1], out) < 0)
        return NULL;
    Py_buffer given;
    if (get_buffer(args[2], &given, "mac") < 0)
        return NULL;
    int ok = given.len == 32 && CRYPTO_memcmp(given.buf, out, 32) == 0;
    PyBuffer_Release(&given);
    return PyBool_FromLong(ok);
}

static PyMethodDef mac_methods[] = {
    {"mac", (PyCFunction)(void (*)(void))mac_mac, METH_FASTCALL,
     "mac(topic, payload) -> the 32-byte HMAC-SHA256 of u16be(len(topic)) + topic + payload"},
    {"sign", (PyCFunction)(void (*)(void))mac_sign, METH_FASTCALL,
     "sign(topic, payload) -> [topic, payload, mac], the three frames of a signed message"},
    {"verify", (PyCFunction)(void (*)(void))mac_verify, METH_FASTCALL,
     "verify(topic, payload, mac) -> whether mac is right (constant-time comparison)"},
    {NULL}
};

static PyTypeObject MacType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "protocol._wire.Mac",
    .tp_doc = "HMAC-SHA256 signer and checker of bus frames under one key (protocol/signing.py)",
    .tp_basicsize = sizeof(MacObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)mac_init,
    .tp_dealloc = (destructor)mac_dealloc,
    .tp_methods = mac_methods,
};


/* ---- the decoder's fast path ------------------------------------------------------------ */

/* Frames -> (topic, Envelope) for a regular message: the right frame count, sizes in bounds,
 * the MAC right, the header and the body accepted by their msgspec decoders (protocol/fastpath.py),
 * version 1, seq >= 0, a type with a body codec. Anything else returns None and the Python
 * decoder (protocol/envelope.py) decides — accepting or naming the reason exactly as always; this
 * never refuses a frame itself. The Envelope's slots are written directly (their offsets read
 * from the class's member descriptors once), as its __init__ would from the decoded header. */

enum { W_V, W_ID, W_TS, W_TYPE, W_FROM, W_NODE, W_SEQ, W_TASK, W_TO, W_CORR, W_REPLY_TO,
       W_TRACE, W_BODY, W_COUNT };
static const char *wire_names[W_COUNT] = {"v", "id", "ts", "type", "from_", "node", "seq", "task",
                                          "to", "corr", "reply_to", "trace", "body"};
enum { E_TYPE, E_BODY, E_SENDER, E_NODE, E_SEQ, E_TASK, E_ID, E_TS, E_TO, E_CORR, E_REPLY_TO,
       E_TRACE, E_V, E_RAW, E_PARSED, E_MODEL, E_COUNT };
static const char *env_names[E_COUNT] = {"type", "_body", "sender", "node", "seq", "task", "id",
                                         "ts", "to", "corr", "reply_to", "trace", "v", "_raw",
                                         "_parsed", "_model"};

typedef struct {
    PyObject_HEAD
    PyObject *wire_decode;      /* msgspec Decoder(WireEnvelope).decode */
    PyObject *codecs;           /* type name -> msgspec Decoder(body Struct).decode */
    PyTypeObject *env_type;     /* protocol.envelope.Envelope */
    PyTypeObject *wire_type;    /* protocol.fastpath.WireEnvelope */
    Py_ssize_t wire_off[W_COUNT];
    Py_ssize_t env_off[E_COUNT];
    Py_ssize_t max_topic;
} DecoderObject;

static int
slot_offsets(PyTypeObject *cls, const char **names, int n, Py_ssize_t *out)
{
    for (int i = 0; i < n; i++) {
        PyObject *d = PyDict_GetItemString(cls->tp_dict, names[i]);   /* borrowed */
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)
                || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not a plain slot", cls->tp_name, names[i]);
            return -1;
        }
        out[i] = ((PyMemberDescrObject *)d)->d_member->offset;
    }
    return 0;
}

static int
decoder_init(DecoderObject *self, PyObject *args, PyObject *kwds)
{
    PyObject *wire_decode, *codecs, *env_type, *wire_type;
    Py_ssize_t max_topic;
    if (!PyArg_ParseTuple(args, "OO!O!O!n:Decoder", &wire_decode, &PyDict_Type, &codecs,
                          &PyType_Type, &env_type, &PyType_Type, &wire_type, &max_topic))
        return -1;
    if (slot_offsets((PyTypeObject *)wire_type, wire_names, W_COUNT, self->wire_off) < 0
            || slot_offsets((PyTypeObject *)env_type, env_names, E_COUNT, self->env_off) < 0)
        return -1;
    Py_INCREF(wire_decode);
    Py_INCREF(codecs);
    Py_INCREF(env_type);
    Py_INCREF(wire_type);
    Py_XSETREF(self->wire_decode, wire_decode);
    Py_XSETREF(self->codecs, codecs);
    Py_XSETREF(self->env_type, (PyTypeObject *)env_type);
    Py_XSETREF(self->wire_type, (PyTypeObject *)wire_type);
    self->max_topic = max_topic;
    return 0;
}

static void
decoder_dealloc(DecoderObject *self)
{
    Py_XDECREF(self->wire_decode);
    Py_XDECREF(self->codecs);
    Py_XDECREF(self->env_type);
    Py_XDECREF(self->wire_type);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *zero;   /* the int 0, made once */

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* decode(frames, max_bytes, mac) -> (topic, Envelope), or None: the Python decoder decides */
static PyObject *
decoder_decode(DecoderObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3)
        return PyErr_Format(PyExc_TypeError, "decode(frames, max_bytes, mac)");
    if (self->wire_decode == NULL)
        return PyErr_Format(PyExc_RuntimeError, "Decoder not initialised");
    PyObject *frames = args[0], *signer = args[2];
    Py_ssize_t max_bytes = PyLong_AsSsize_t(args[1]);
    if (max_bytes == -1 && PyErr_Occurred())
        return NULL;
    int signed_ = signer != Py_None;
    if (signed_ && !Py_IS_TYPE(signer, &MacType))
        Py_RETURN_NONE;
    if (!PyList_CheckExact(frames) || PyList_GET_SIZE(frames) != (signed_ ? 3 : 2))
        Py_RETURN_NONE;
    PyObject *topic = PyList_GET_ITEM(frames, 0), *payload = PyList_GET_ITEM(frames, 1);
    if (!PyBytes_CheckExact(topic) || !PyBytes_CheckExact(payload)
            || PyBytes_GET_SIZE(payload) > max_bytes || PyBytes_GET_SIZE(topic) > self->max_topic)
        Py_RETURN_NONE;
    if (signed_) {
        PyObject *mac = PyList_GET_ITEM(frames, 2);
        unsigned char out[32];
        if (!PyBytes_CheckExact(mac) || PyBytes_GET_SIZE(mac) != 32)
            Py_RETURN_NONE;
        if (compute((MacObject *)signer, topic, payload, out) < 0) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (CRYPTO_memcmp(PyBytes_AS_STRING(mac), out, 32) != 0)
            Py_RETURN_NONE;
    }
    PyObject *w = PyObject_CallOneArg(self->wire_decode, payload);
    if (w == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *result = NULL, *parsed = NULL, *env = NULL;
    if (!Py_IS_TYPE(w, self->wire_type))
        goto fallback;
    PyObject *f[W_COUNT];
    for (int i = 0; i < W_COUNT; i++) {
        f[i] = SLOT(w, self->wire_off[i]);
        if (f[i] == NULL)
            goto fallback;
    }
    /* v == 1, seq >= 0 (an int of any size), the type one with a body codec */
    if (!PyLong_CheckExact(f[W_V]) || PyLong_AsLong(f[W_V]) != 1) {
        PyErr_Clear();
        goto fallback;
    }
    if (!PyLong_CheckExact(f[W_SEQ]))
        goto fallback;
    int negative = PyObject_RichCompareBool(f[W_SEQ], zero, Py_LT);
    if (negative != 0) {
        PyErr_Clear();
        goto fallback;
    }
    if (!PyUnicode_CheckExact(f[W_TYPE]))
        goto fallback;
    PyObject *codec = PyDict_GetItemWithError(self->codecs, f[W_TYPE]);   /* borrowed */
    if (codec == NULL) {
        PyErr_Clear();
        goto fallback;
    }
    parsed = PyObject_CallOneArg(codec, f[W_BODY]);
    if (parsed == NULL) {
        PyErr_Clear();
        goto fallback;
    }
    env = self->env_type->tp_alloc(self->env_type, 0);
    if (env == NULL)
        goto error;
    static const int from_wire[][2] = {
        {E_TYPE, W_TYPE}, {E_SENDER, W_FROM}, {E_NODE, W_NODE}, {E_SEQ, W_SEQ},
        {E_TASK, W_TASK}, {E_ID, W_ID}, {E_TS, W_TS}, {E_TO, W_TO}, {E_CORR, W_CORR},
        {E_REPLY_TO, W_REPLY_TO}, {E_TRACE, W_TRACE}, {E_V, W_V}, {E_RAW, W_BODY}};
    for (size_t i = 0; i < sizeof from_wire / sizeof from_wire[0]; i++) {
        PyObject *v = f[from_wire[i][1]];
        Py_INCREF(v);
        SLOT(env, self->env_off[from_wire[i][0]]) = v;
    }
    Py_INCREF(Py_None);
    SLOT(env, self->env_off[E_BODY]) = Py_None;
    Py_INCREF(Py_None);
    SLOT(env, self->env_off[E_MODEL]) = Py_None;
    SLOT(env, self->env_off[E_PARSED]) = parsed;   /* the reference moves into the slot */
    parsed = NULL;
    result = PyTuple_Pack(2, topic, env);
    Py_DECREF(env);
    Py_DECREF(w);
    return result;
fallback:
    Py_XDECREF(parsed);
    Py_DECREF(w);
    Py_RETURN_NONE;
error:
    Py_XDECREF(parsed);
    Py_DECREF(w);
    return NULL;
}

static PyMethodDef decoder_methods[] = {
    {"decode", (PyCFunction)(void (*)(void))decoder_decode, METH_FASTCALL,
     "decode(frames, max_bytes, mac) -> (topic, Envelope) of a regular message, else None"},
    {NULL}
};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "protocol._wire.Decoder",
    .tp_doc = "Decoder(wire_decode, codecs, Envelope, WireEnvelope, max_topic): the fast path of "
              "protocol.envelope.decode",
    .tp_basicsize = sizeof(DecoderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)decoder_init,
    .tp_dealloc = (destructor)decoder_dealloc,
    .tp_methods = decoder_methods,
};

/* ---- a validated body Struct as its pydantic model ----------------------------------------- */

static PyObject *s_fields_set, *s_extra, *s_private, *empty_tuple;

/* model(cls, asdict, fields, struct) -> cls's instance holding the struct's field values, built
 * as protocol/fastpath.py's converter builds it in Python (object.__new__, the field dict as its
 * __dict__, the fields set, no extra or private values) — no second validation: msgspec has
 * validated the struct against the model's own mirror. Only for flat models (no nested model). */
static PyObject *
wire_model(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4)
        return PyErr_Format(PyExc_TypeError, "model(cls, asdict, fields, struct)");
    PyObject *cls = args[0];
    if (!PyType_Check(cls))
        return PyErr_Format(PyExc_TypeError, "model: cls must be a class");
    PyObject *d = PyObject_CallOneArg(args[1], args[3]);
    if (d == NULL)
        return NULL;
    PyObject *fields = NULL, *obj = NULL;
    if (!PyDict_CheckExact(d)) {
        PyErr_SetString(PyExc_TypeError, "model: asdict did not return a dict");
        goto fail;
    }
    fields = PySet_New(args[2]);
    if (fields == NULL)
        goto fail;
    obj = PyBaseObject_Type.tp_new((PyTypeObject *)cls, empty_tuple, NULL);   /* object.__new__ */
    if (obj == NULL
            || PyObject_GenericSetDict(obj, d, NULL) < 0
            || PyObject_GenericSetAttr(obj, s_fields_set, fields) < 0
            || PyObject_GenericSetAttr(obj, s_extra, Py_None) < 0
            || PyObject_GenericSetAttr(obj, s_private, Py_None) < 0)
        goto fail;
    Py_DECREF(d);
    Py_DECREF(fields);
    return obj;
fail:
    Py_XDECREF(obj);
    Py_XDECREF(fields);
    Py_DECREF(d);
    return NULL;
}

/* ---- an envelope's msgpack, written directly ---------------------------------------------- */

/* The bytes msgspec's encoder writes for the envelope map {"v": 1, "id": .., "ts": .., "type": ..,
 * "from": .., "node": .., "seq": .., "task": .., "to": .., "corr": .., "reply_to": .., "trace": ..,
 * "body": ..} in that key order (protocol/envelope.py `Envelope.to_wire`), with the body's own
 * msgpack spliced in as given — what the publisher would otherwise build a dict for and encode.
 * The smallest msgpack forms, as msgspec and msgpack write them; tests compare byte for byte. */

typedef struct { char *buf; Py_ssize_t len, cap; } Out;

static int
out_put(Out *o, const void *data, Py_ssize_t n)
{
    if (o->len + n > o->cap) {
        Py_ssize_t cap = (o->len + n) * 2;
        char *grown = PyMem_Realloc(o->buf, (size_t)cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        o->buf = grown;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, data, (size_t)n);
    o->len += n;
    return 0;
}

static int
out_head(Out *o, unsigned char tag, uint64_t n, int bytes)
{
    unsigned char h[9];
    h[0] = tag;
    for (int i = 0; i < bytes; i++)
        h[1 + i] = (unsigned char)(n >> (8 * (bytes - 1 - i)));
    return out_put(o, h, 1 + bytes);
}

static int
out_str(Out *o, PyObject *obj, const char *field, int optional)
{
    if (optional && obj == Py_None) {
        unsigned char nil = 0xc0;
        return out_put(o, &nil, 1);
    }
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "envelope field %s must be str, not %s", field,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(obj, &n);
    if (utf8 == NULL)
        return -1;
    int rc = n < 32 ? out_head(o, (unsigned char)(0xa0 | n), 0, 0)
           : n <= 0xff ? out_head(o, 0xd9, (uint64_t)n, 1)
           : n <= 0xffff ? out_head(o, 0xda, (uint64_t)n, 2)
           : out_head(o, 0xdb, (uint64_t)n, 4);
    return rc < 0 ? -1 : out_put(o, utf8, n);
}

static int
out_key(Out *o, const char *key)
{
    Py_ssize_t n = (Py_ssize_t)strlen(key);   /* the keys are short: fixstr */
    return out_head(o, (unsigned char)(0xa0 | n), 0, 0) < 0 ? -1 : out_put(o, key, n);
}

static int
out_int(Out *o, PyObject *obj)
{
    if (!PyLong_CheckExact(obj)) {
        PyErr_Format(PyExc_TypeError, "envelope field seq must be int, not %s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow > 0) {   /* up to 2**64 - 1, as uint64 */
        unsigned long long u = PyLong_AsUnsignedLongLong(obj);
        if (u == (unsigned long long)-1 && PyErr_Occurred())
            return -1;
        return out_head(o, 0xcf, u, 8);
    }
    if (overflow < 0 || (v == -1 && PyErr_Occurred())) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_OverflowError, "seq below -2**63");
        return -1;
    }
    if (v >= 0) {
        uint64_t u = (uint64_t)v;
        return u <= 0x7f ? out_head(o, (unsigned char)u, 0, 0)
             : u <= 0xff ? out_head(o, 0xcc, u, 1)
             : u <= 0xffff ? out_head(o, 0xcd, u, 2)
             : u <= 0xffffffffULL ? out_head(o, 0xce, u, 4)
             : out_head(o, 0xcf, u, 8);
    }
    return v >= -32 ? out_head(o, (unsigned char)(v & 0xff), 0, 0)
         : v >= -128 ? out_head(o, 0xd0, (uint64_t)v, 1)
         : v >= -32768 ? out_head(o, 0xd1, (uint64_t)v, 2)
         : v >= -2147483648LL ? out_head(o, 0xd2, (uint64_t)v, 4)
         : out_head(o, 0xd3, (uint64_t)v, 8);
}

/* pack_envelope(id, ts, type, from, node, seq, task, to, corr, reply_to, trace, body) -> bytes */
static PyObject *
wire_pack_envelope(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 12)
        return PyErr_Format(PyExc_TypeError, "pack_envelope takes 12 arguments, got %zd", nargs);
    PyObject *body = args[11];
    if (!PyBytes_Check(body))
        return PyErr_Format(PyExc_TypeError, "body must be msgpack bytes");
    double ts = PyFloat_AsDouble(args[1]);
    if (ts == -1.0 && PyErr_Occurred())
        return NULL;
    if (!PyFloat_CheckExact(args[1]))
        return PyErr_Format(PyExc_TypeError, "envelope field ts must be float");
    Out o = {PyMem_Malloc(512), 0, 512};   /* most envelopes fit; grown if not */
    if (o.buf == NULL)
        return PyErr_NoMemory();
    union { double d; uint64_t u; } bits = {.d = ts};
    static const char *str_keys[] = {"type", "from", "node"};
    static const char *opt_keys[] = {"to", "corr", "reply_to", "trace"};
    PyObject *result = NULL;
    if (out_head(&o, 0x8d, 0, 0) < 0                                   /* a map of 13 */
            || out_key(&o, "v") < 0 || out_head(&o, 0x01, 0, 0) < 0
            || out_key(&o, "id") < 0 || out_str(&o, args[0], "id", 0) < 0
            || out_key(&o, "ts") < 0 || out_head(&o, 0xcb, bits.u, 8) < 0)
        goto done;
    for (int i = 0; i < 3; i++)
        if (out_key(&o, str_keys[i]) < 0 || out_str(&o, args[2 + i], str_keys[i], 0) < 0)
            goto done;
    if (out_key(&o, "seq") < 0 || out_int(&o, args[5]) < 0
            || out_key(&o, "task") < 0 || out_str(&o, args[6], "task", 0) < 0)
        goto done;
    for (int i = 0; i < 4; i++)
        if (out_key(&o, opt_keys[i]) < 0 || out_str(&o, args[7 + i], opt_keys[i], 1) < 0)
            goto done;
    if (out_key(&o, "body") < 0
            || out_put(&o, PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body)) < 0)
        goto done;
    result = PyBytes_FromStringAndSize(o.buf, o.len);
done:
    PyMem_Free(o.buf);
    return result;
}

static PyMethodDef wire_methods[] = {
    {"bind", wire_bind, METH_O, "bind(path): use the libzmq already loaded from path"},
    {"pack_envelope", (PyCFunction)(void (*)(void))wire_pack_envelope, METH_FASTCALL,
     "pack_envelope(id, ts, type, from, node, seq, task, to, corr, reply_to, trace, body) -> "
     "the envelope's msgpack, the body's msgpack spliced in"},
    {"recv", wire_recv, METH_O,
     "recv(handle) -> the frames of the next message on the socket, or None (none queued)"},
    {"model", (PyCFunction)(void (*)(void))wire_model, METH_FASTCALL,
     "model(cls, asdict, fields, struct) -> the pydantic model of a validated flat body Struct"},
    {"send", (PyCFunction)(void (*)(void))wire_send, METH_FASTCALL,
     "send(handle, frames): one message of these frames on the socket, without blocking"},
    {NULL}
};

static struct PyModuleDef wire_module = {
    PyModuleDef_HEAD_INIT, "protocol._wire",
    "The bus client's frame I/O and HMAC in C (see protocol/accel.py).", -1, wire_methods,
};

PyMODINIT_FUNC
PyInit__wire(void)
{
    if (PyType_Ready(&MacType) < 0 || PyType_Ready(&DecoderType) < 0)
        return NULL;
    if (zero == NULL && ((zero = PyLong_FromLong(0)) == NULL
            || (empty_tuple = PyTuple_New(0)) == NULL
            || (s_fields_set = PyUnicode_InternFromString("__pydantic_fields_set__")) == NULL
            || (s_extra = PyUnicode_InternFromString("__pydantic_extra__")) == NULL
            || (s_private = PyUnicode_InternFromString("__pydantic_private__")) == NULL))
        return NULL;
    PyObject *m = PyModule_Create(&wire_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&MacType);
    if (PyModule_AddObject(m, "Mac", (PyObject *)&MacType) < 0) {
        Py_DECREF(&MacType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&DecoderType);
    if (PyModule_AddObject(m, "Decoder", (PyObject *)&DecoderType) < 0) {
        Py_DECREF(&DecoderType);
        Py_DECREF(m);
        return NULL;
    }
    /* what protocol/accel.py expects: a build left from an older source is not used */
    if (PyModule_AddIntConstant(m, "ABI", WIRE_ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
