/* torch_classes.c - what PyTorch's live tensors are, read with the GIL (see
 * torch_classes.h).
 *
 * The walk is Python code, compiled once into a function of our own
 * (exec of CLASSIFY in a namespace only we hold): it finds the nn.Module
 * and Optimizer objects among those the garbage collector tracks (every
 * instance of a class with a __dict__ is) by their type alone: no
 * attribute of the program's other objects is read (isinstance() reads each
 * one's __class__, and a deprecated object such as PyTorch's
 * torch.distributed.reduce_op warns at every read: into the program's
 * stderr, or under -W error as an exception). It takes the modules no other
 * found module holds as the roots, and lists each root's named_parameters() (the
 * qualified names, prefixed by the root's name in __main__ when several
 * roots hold parameters; torch.compile's `_orig_mod.` left out), their
 * .grad, the optimizers' parameters no module holds, and every CUDA tensor
 * in optimizer.state[parameter]. It answers
 * with two bytes objects, packed addresses and the names, so that the C side
 * makes no call per tensor. It holds no reference once it returns: no
 * tensor lives longer for being looked at.
 *
 * It runs only where the bridge reads for a report (a snapshot, the OOM
 * observer, Python's exit), never periodically: the walk is one pass over
 * every object the garbage collector tracks, an issubclass() each. */
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "py_api.h"
#include "torch_classes.h"

static const char CLASSIFY[] =
    "def classify(torch, gc, main):\n"
    "    Module, Optimizer, Tensor = torch.nn.Module, torch.optim.Optimizer, torch.Tensor\n"
    "    found = []\n"
    "    for o in gc.get_objects():\n"
    "        try:\n"
    "            if issubclass(type(o), (Module, Optimizer)):\n"
    "                found.append(o)\n"
    "        except Exception:\n"
    "            pass\n"
    "    modules = [o for o in found if issubclass(type(o), Module)]\n"
    "    optimizers = [o for o in found if issubclass(type(o), Optimizer)]\n"
    "    inner = set()\n"
    "    for m in modules:\n"
    "        try:\n"
    "            inner.update(id(c) for c in m.children())\n"
    "        except Exception:\n"
    "            pass\n"
    "    try:\n"
    "        named = {id(v): k for k, v in vars(main).items()}\n"
    "    except Exception:\n"
    "        named = {}\n"
    "    roots = []\n"
    "    for m in modules:\n"
    "        try:\n"
    "            if id(m) not in inner and next(iter(m.parameters()), None) is not None:\n"
    "                roots.append(m)\n"
    "        except Exception:\n"
    "            pass\n"
    "    records, owners, index = [], [], {}\n"
    "    def keep(t, kind, owner):\n"
    "        try:\n"
    "            if issubclass(type(t), Tensor) and t.is_cuda and t.data_ptr():\n"
    "                records.append(t.data_ptr().to_bytes(8, 'little') +\n"
    "                               (t.numel() * t.element_size()).to_bytes(8, 'little') +\n"
    "                               (kind << 32 | owner).to_bytes(8, 'little'))\n"
    "        except Exception:\n"
    "            pass\n"
    "    def parameter(p, name):\n"
    "        if id(p) not in index:\n"
    "            index[id(p)] = len(owners)\n"
    "            owners.append(name)\n"
    "            keep(p, 0, index[id(p)])\n"
    "            keep(p.grad, 1, index[id(p)])\n"
    "        return index[id(p)]\n"
    "    for m in roots:\n"
    "        prefix = named.get(id(m), type(m).__name__) + '.' if len(roots) > 1 else ''\n"
    "        try:\n"
    "            for name, p in m.named_parameters():\n"
    "                parameter(p, prefix + name.replace('_orig_mod.', ''))\n"
    "        except Exception:\n"
    "            pass\n"
    "    for o in optimizers:\n"
    "        label = named.get(id(o), type(o).__name__)\n"
    "        try:\n"
    "            for g, group in enumerate(o.param_groups):\n"
    "                for i, p in enumerate(group['params']):\n"
    "                    parameter(p, '%s.param_groups[%d][%d]' % (label, g, i))\n"
    "            for p, state in o.state.items():\n"
    "                owner = parameter(p, label + '.state')\n"
    "                for value in state.values():\n"
    "                    keep(value, 2, owner)\n"
    "        except Exception:\n"
    "            pass\n"
    "    return (b''.join(records), '\\0'.join(owners).encode('utf-8', 'replace'),\n"
    "            len(modules), len(optimizers))\n";

static PyObject *classify;   /* the compiled function, kept for the process's life */

/* With the GIL: CLASSIFY compiled, once. */
static PyObject *classifier(void)
{
    if (classify)
        return classify;
    PyObject *builtins = py.import("builtins");
    PyObject *scope = builtins ? py.build_value("{}") : NULL;
    PyObject *done = scope ? py.call_method(builtins, "exec", "sO", CLASSIFY, scope) : NULL;
    PyObject *function = done ? py.dict_get(scope, "classify") : NULL;   /* borrowed */
    if (function) {
        py.incref(function);
        classify = function;
    }
    py_release(done);
    py_release(scope);
    py_release(builtins);
    return classify;
}

static struct torch_classes *empty(const char *why)
{
    struct torch_classes *c = pages_alloc(sizeof(*c));
    if (c) {
        memset(c, 0, sizeof(*c));
        c->mapped = sizeof(*c);
        c->why = why;
    }
    return c;
}

static int by_address(const void *a, const void *b)
{
    const struct torch_tensor_ref *x = a, *y = b;
    return x->address < y->address ? -1 : x->address > y->address;
}

/* The answer (records, names, modules, optimizers) in one mapping. */
static struct torch_classes *unpack(PyObject *answer)
{
    char *records, *text;
    py_ssize record_bytes, text_bytes;
    PyObject *modules = py.tuple_item(answer, 2), *optimizers = py.tuple_item(answer, 3);
    if (!modules || !optimizers ||
        py.bytes_data(py.tuple_item(answer, 0), &records, &record_bytes) < 0 ||
        py.bytes_data(py.tuple_item(answer, 1), &text, &text_bytes) < 0)
        return empty("reading PyTorch's modules and optimizers failed");
    size_t count = (size_t)record_bytes / 24, names = text_bytes > 0 ? 1 : 0;
    for (py_ssize i = 0; i < text_bytes; i++)
        names += text[i] == '\0';
    if (count > UINT32_MAX || names > UINT32_MAX)
        return empty("more tensors than a report can class");
    size_t bytes = sizeof(struct torch_classes) + count * sizeof(struct torch_tensor_ref) +
                   names * sizeof(char *) + (size_t)text_bytes + 1;
    struct torch_classes *c = pages_alloc(bytes);
    if (!c)
        return NULL;
    memset(c, 0, sizeof(*c));
    c->mapped = bytes;
    c->modules = (uint32_t)py.as_unsigned(modules);
    c->optimizers = (uint32_t)py.as_unsigned(optimizers);
    c->tensors = (struct torch_tensor_ref *)(c + 1);
    c->names = (const char **)(c->tensors + count);
    char *copy = (char *)(c->names + names);
    memcpy(copy, text, (size_t)text_bytes);
    copy[text_bytes] = '\0';
    for (size_t i = 0; i < count; i++) {
        uint64_t field[3];
        memcpy(field, records + i * 24, sizeof(field));   /* little-endian, as packed */
        uint32_t owner = (uint32_t)field[2], kind = (uint32_t)(field[2] >> 32);
        if (owner >= names || kind >= TENSOR_CLASSES)
            continue;
        c->tensors[c->count++] = (struct torch_tensor_ref){field[0], field[1], owner, kind};
    }
    qsort(c->tensors, c->count, sizeof(*c->tensors), by_address);
    for (size_t i = 0, at = 0; i < names; i++) {
        c->names[i] = copy + at;
        at += strlen(copy + at) + 1;
    }
    c->name_count = (uint32_t)names;
    if (!c->modules && !c->optimizers)
        c->why = "the program holds no nn.Module or optimizer";
    return c;
}

struct torch_classes *torch_classes_read(void)
{
    PyObject *torch = py_imported("torch");   /* borrowed */
    if (!torch)
        return empty("PyTorch is not imported");
    PyObject *nn = py_attr(torch, "nn"), *optim = py_attr(torch, "optim");
    PyObject *gc = nn && optim ? py.import("gc") : NULL;
    PyObject *main = py.dict_get(py.module_dict(), "__main__");   /* borrowed */
    PyObject *function = gc && main ? classifier() : NULL;
    PyObject *answer = function ? py.call_function(function, torch, gc, main, NULL) : NULL;
    struct torch_classes *c = answer ? unpack(answer)
                              : empty(!nn || !optim ? "torch.nn or torch.optim is not loaded"
                                                    : "reading PyTorch's modules and optimizers "
                                                      "raised an exception");
    py_release(answer);
    py_release(gc);
    py_release(optim);
    py_release(nn);
    py.clear();
    return c;
}

void torch_classes_free(struct torch_classes *c)
{
    if (c)
        pages_free(c, c->mapped);
}
