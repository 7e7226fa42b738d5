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
 * every object the garbage collector tracks, an issubclass() each. The
 * holders walk alone also runs when `cumemtrace live` asks for it
 * (holders_live.c), at most one walk per request and spaced out.
 *
 * The same readings walk from Python's roots to every PyTorch tensor, CuPy
 * and JAX array (RETAIN, below), to name who holds them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "config.h"
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

/* Who holds the arrays: breadth first from Python's roots (the modules
 * in sys.modules, __main__ first, then the frames of live threads: their
 * locals), through dict values (keys too), list, tuple and set items
 * ([*]), instance attributes and slots, class attributes (a class names
 * its own path: `KeepOutputs.outputs`), closures (`f.<closure>.name`) and,
 * for other objects, what gc.get_referents finds (their tp_traverse: C);
 * from a tensor, its autograd graph (grad_fn, the nodes' next_functions,
 * a leaf's variable, the tensors each node saved), whose arrays are held by
 * "the graph of" the tensor's path: the saved tensors read last, so that
 * only what the graph alone keeps is named by it.
 * No user code runs: types are read with type(), attributes through the
 * descriptors of the type's own dicts (never getattr, a property or
 * __getattribute__), containers through their base type's methods; an
 * object's attribute names are read only for the few on a path to an
 * array, and only the arrays' own methods are called (a tensor's
 * untyped_storage(), else data_ptr(): the stand-in's; a CuPy array's
 * .data.ptr; a JAX array's unsafe_buffer_pointer()). Each array's memory is
 * counted once, under the first path that reached it (the shortest); the
 * arrays no root reaches are said as such (held from C, or garbage the
 * collector has not yet freed). The
 * collector is disabled during the walk (if it was enabled), so that no
 * finalizer runs in it, and every reference the walk took is dropped
 * before it returns. Bounded by a time budget and an object count: a walk
 * cut short says where, and names what it reached. */
static const char RETAIN[] =
    "class Cut(Exception):\n"
    "    pass\n"
    "\n"
    "\n"
    "class Refused(Exception):\n"
    "    pass\n"
    "\n"
    "\n"
    "def refuse(frame, event, arg):\n"
    "    # The profile function while a graph's saved tensors are read: a\n"
    "    # getter that would call the program's Python (an unpack hook) fails.\n"
    "    if event == 'call':\n"
    "        raise Refused('an unpack hook')\n"
    "\n"
    "\n"
    "RECORD = 8   # a dict of more entries is a table: its keys are not named\n"
    "UNREACHED = '<no Python root reaches it: held from C, or garbage not yet collected>'\n"
    "GRAPH, GRAPH_OF = '<graph>', 'the graph of '   # a label, and how its paths read\n"
    "\n"
    "\n"
    "def walk(gc, sys, seconds, limit):\n"
    "    tp = type\n"
    "    def loaded_class(module, name):\n"
    "        try:\n"
    "            found = getattr(sys.modules.get(module), name, None)\n"
    "        except Exception:\n"
    "            return None\n"
    "        return found if tp(found) is not tp(None) and issubclass(tp(found), tp) else None\n"
    "    Tensor, CupyArray = loaded_class('torch', 'Tensor'), loaded_class('cupy', 'ndarray')\n"
    "    JaxArray = loaded_class('jax._src.array', 'ArrayImpl')\n"
    "    ARRAYS = tuple(a for a in (Tensor, CupyArray, JaxArray) if a is not None)\n"
    "    FunctionType = tp(walk)\n"
    "    ATOMIC = (str, bytes, bytearray, int, float, complex, bool, tp(None), range, memoryview,\n"
    "              tp(walk.__code__))\n"
    "    GetSet, Member = tp(tp.__dict__['__dict__']), tp(FunctionType.__dict__['__globals__'])\n"
    "    Module, Frame = tp(sys), tp(sys._getframe())\n"
    "    module_dict = Module.__dict__['__dict__'].__get__\n"
    "    clock = getattr(sys.modules.get('time'), 'perf_counter', None)\n"
    "    deadline = clock() + seconds if clock else None\n"
    "    started = clock() if clock else 0\n"
    "    type_dict = tp.__dict__['__dict__'].__get__\n"
    "    type_flags = tp.__dict__['__flags__'].__get__\n"
    "    type_qualname = tp.__dict__['__qualname__'].__get__\n"
    "    type_mro = tp.__dict__['__mro__'].__get__\n"
    "    func_closure = FunctionType.__dict__['__closure__'].__get__\n"
    "    func_code = FunctionType.__dict__['__code__'].__get__\n"
    "    func_qualname = FunctionType.__dict__['__qualname__'].__get__\n"
    "    storage = getattr(Tensor, 'untyped_storage', None)\n"
    "    own = walk.__globals__\n"
    "    nodes, parents, labels, seen, keys, found = [], [], [], {}, {}, []\n"
    "    walking = False   # the roots are all taken, whatever the budget\n"
    "    snapshots = [] if sys.version_info < (3, 13) else None\n"
    "    func_code_flags = tp(walk.__code__).__dict__['co_flags'].__get__\n"
    "    named = {}\n"
    "    cut = ''\n"
    "    def add(o, parent, label):\n"
    "        if tp(o) in ATOMIC or id(o) in seen:\n"
    "            return\n"
    "        seen[id(o)] = len(nodes)\n"
    "        nodes.append(o)\n"
    "        parents.append(parent)\n"
    "        labels.append(label)\n"
    "        if issubclass(tp(o), ARRAYS):   # found as soon as reached: a walk cut short\n"
    "            found.append(len(nodes) - 1)   # still names the arrays it reached\n"
    "        if len(nodes) & 1023 == 0 and walking:\n"
    "            if len(nodes) > limit:\n"
    "                raise Cut('after %d objects' % limit)\n"
    "            if deadline and clock() > deadline:\n"
    "                raise Cut('after %g s' % seconds)\n"
    "    def attributes(o):\n"
    "        try:\n"
    "            found = {}\n"
    "            for cls in type_mro(tp(o)):\n"
    "                d = type_dict(cls)\n"
    "                descr = d.get('__dict__')\n"
    "                if tp(descr) in (GetSet, Member) and '__dict__' not in found:\n"
    "                    found['__dict__'] = descr\n"
    "                slots = d.get('__slots__', ())\n"
    "                for s in slots if tp(slots) in (tuple, list) else (slots,):\n"
    "                    if tp(s) is str:\n"
    "                        private = s.startswith('__') and not s.endswith('__')\n"
    "                        n = '_' + type_qualname(cls).lstrip('_') + s if private else s\n"
    "                        if tp(d.get(n)) is Member:\n"
    "                            found[s] = d[n]\n"
    "            return found\n"
    "        except Exception:\n"
    "            return {}\n"
    "    descriptors, saved_types = {}, {}\n"
    "    def field(o, name):\n"
    "        # o's attribute through its type's getter or slot, else None: a\n"
    "        # property or __getattr__ is never run, no __dict__ made.\n"
    "        t = tp(o)\n"
    "        if (t, name) not in descriptors:\n"
    "            descriptors[t, name] = next((type_dict(c)[name] for c in type_mro(t)\n"
    "                                         if name in type_dict(c)), None)\n"
    "        descr = descriptors[t, name]\n"
    "        return descr.__get__(o, t) if tp(descr) in (GetSet, Member) else None\n"
    "    def saved_of(t):\n"
    "        # A graph node's getters of its saved tensors: PyTorch's generated\n"
    "        # _saved_<input>, a custom Function's saved_tensors.\n"
    "        if t not in saved_types:\n"
    "            found = {}\n"
    "            for c in type_mro(t):\n"
    "                for k, d in list(type_dict(c).items()):\n"
    "                    if (tp(k) is str and (k.startswith('_saved_') or k == 'saved_tensors')\n"
    "                            and tp(d) in (GetSet, Member) and k not in found):\n"
    "                        found[k] = d\n"
    "            saved_types[t] = list(found.values())\n"
    "        return saved_types[t]\n"
    "    def label_of(p, o):\n"
    "        for name, descr in attributes(p).items():\n"
    "            try:\n"
    "                v = descr.__get__(p, tp(p))\n"
    "            except Exception:\n"
    "                continue\n"
    "            if name == '__dict__' and v is o:\n"
    "                return '.__dict__'\n"
    "            if name != '__dict__':\n"
    "                if v is o:\n"
    "                    return '.' + name\n"
    "                continue\n"
    "            if tp(v) is dict:\n"
    "                for k, w in list(dict.items(v)):\n"
    "                    if w is o and tp(k) is str:\n"
    "                        return '.' + k\n"
    "        return '.<%s>' % tp(o).__name__\n"
    "    # The roots, __main__ first: the program's own modules' globals and the\n"
    "    # frames of live threads; the installed packages' and the standard\n"
    "    # library's modules only once those are walked (a budget spent on\n"
    "    # transformers' thousand modules would leave the program's own unnamed).\n"
    "    modules = list(dict.items(sys.modules))\n"
    "    modules.sort(key=lambda item: item[0] != '__main__')\n"
    "    stdlib = getattr(sys, 'base_prefix', '') + '/lib/'\n"
    "    later = []\n"
    "    for name, m in modules:\n"
    "        if tp(m) is Module and id(m) not in seen:\n"
    "            path = module_dict(m).get('__file__')\n"
    "            if name != '__main__' and (tp(path) is not str or 'site-packages' in path or\n"
    "                                      'dist-packages' in path or path.startswith(stdlib)):\n"
    "                later.append((name, m))\n"
    "                continue\n"
    "            named[len(nodes)] = name\n"
    "            add(m, -1, None)\n"
    "    threading = sys.modules.get('threading')\n"
    "    threads = {}\n"
    "    def instance_dict(o):\n"
    "        descr = attributes(o).get('__dict__')\n"
    "        return descr.__get__(o, tp(o)) if descr is not None else {}\n"
    "    try:\n"
    "        threads = dict(dict.items(module_dict(threading)['_active']))\n"
    "        main = module_dict(threading)['_main_thread']\n"
    "    except Exception:\n"
    "        main = None\n"
    "    for ident, frame in list(dict.items(sys._current_frames())):\n"
    "        thread = threads.get(ident)\n"
    "        where = ''\n"
    "        if thread is not None and thread is not main:\n"
    "            where = '%s:' % instance_dict(thread).get('_name', ident)\n"
    "        while frame is not None:\n"
    "            if frame.f_globals is not own:\n"
    "                code = frame.f_code\n"
    "                name = getattr(code, 'co_qualname', code.co_name)\n"
    "                named[len(nodes)] = '%s%s()' % (where, name)\n"
    "                nodes.append(frame)\n"
    "                parents.append(-1)\n"
    "                labels.append(None)\n"
    "                seen[id(frame)] = len(nodes) - 1\n"
    "            frame = frame.f_back\n"
    "    # A graph's saved tensors, read once every root's objects are walked (a\n"
    "    # tensor something else holds is named by that), under `refuse`: PyTorch\n"
    "    # reads a saved tensor through its unpack hook where one was set\n"
    "    # (torch.utils.checkpoint's runs the forward pass again), and a hook is\n"
    "    # the program's code. Nothing in the reading loop calls Python; under a\n"
    "    # profiler of the program's own, nothing is read.\n"
    "    def read_saved(pending):\n"
    "        reads = [(p, d) for p in pending for d in saved_of(tp(nodes[p]))]\n"
    "        if not reads or sys.getprofile() is not None:\n"
    "            return\n"
    "        values = []\n"
    "        sys.setprofile(refuse)\n"
    "        try:\n"
    "            for p, d in reads:\n"
    "                try:\n"
    "                    values.append((p, d.__get__(nodes[p], tp(nodes[p]))))\n"
    "                except Exception:   # refused (the profile function is unset), or freed\n"
    "                    sys.setprofile(refuse)\n"
    "                if deadline and clock() > deadline:\n"
    "                    break\n"
    "        finally:\n"
    "            sys.setprofile(None)\n"
    "        for p, v in values:\n"
    "            for w in v if tp(v) in (tuple, list) else (v,):\n"
    "                add(w, p, GRAPH)\n"
    "    # Breadth first.\n"

    "    i, walking, pending = 0, True, []\n"
    "    while i < len(nodes) or later or pending:\n"
    "        if i == len(nodes) and later:   # roots: taken whatever the budget, as the first\n"
    "            walking = False\n"
    "            for name, m in later:\n"
    "                if id(m) not in seen:\n"
    "                    named[len(nodes)] = name\n"
    "                    add(m, -1, None)\n"
    "            later, walking = [], True\n"
    "            continue\n"
    "        if i == len(nodes):\n"
    "            try:\n"
    "                read, pending = pending, []\n"
    "                read_saved(read)\n"
    "            except Cut as stop:\n"
    "                cut = stop.args[0]\n"
    "                break\n"
    "            continue\n"
    "        o = nodes[i]\n"
    "        t = tp(o)\n"
    "        try:\n"
    "            if issubclass(t, ARRAYS):   # an array: only a tensor's graph is followed\n"
    "                if Tensor is not None and issubclass(t, Tensor):\n"
    "                    add(field(o, 'grad_fn'), i, GRAPH)\n"
    "            elif labels[i] == GRAPH:   # a node of autograd's graph\n"
    "                pending.append(i)\n"
    "                for edge in field(o, 'next_functions') or ():\n"
    "                    if tp(edge) is tuple and edge:\n"
    "                        add(edge[0], i, GRAPH)\n"
    "                add(field(o, 'variable'), i, GRAPH)   # a leaf's accumulator\n"
    "                for v in gc.get_referents(o):   # a custom Function's ctx\n"
    "                    if issubclass(tp(v), ARRAYS):\n"
    "                        add(v, i, GRAPH)\n"
    "            elif t is Module:\n"
    "                for k, v in list(dict.items(module_dict(o))):\n"
    "                    add(v, i, '.' + k if tp(k) is str else '[*]')\n"
    "            elif t is Frame and parents[i] < 0 and o.f_trace is None:\n"
    "                names = o.f_locals\n"
    "                if snapshots is not None and func_code_flags(o.f_code) & 1:\n"
    "                    snapshots.append(names)\n"
    "                items = dict.items(names) if tp(names) is dict else names.items()\n"
    "                for k, v in list(items):\n"
    "                    add(v, i, '.' + k if tp(k) is str else '[*]')\n"
    "            elif issubclass(t, dict):\n"
    "                for k, v in list(dict.items(o)):\n"
    "                    add(k, i, '.keys()[*]')\n"
    "                    if tp(k) is str and tp(v) not in ATOMIC and id(v) not in seen:\n"
    "                        keys[len(nodes)] = k\n"
    "                    add(v, i, '[*]')\n"
    "            elif issubclass(t, (list, tuple, set, frozenset)):\n"
    "                for v in list(gc.get_referents(o)):\n"
    "                    add(v, i, '[*]')\n"
    "            elif issubclass(t, tp):\n"
    "                if type_flags(o) & (1 << 9):\n"
    "                    named[i] = type_qualname(o)\n"
    "                    for k, v in list(type_dict(o).items()):\n"
    "                        add(v, i, '.' + k)\n"
    "            elif t is FunctionType:\n"
    "                named[i] = func_qualname(o)\n"
    "                cells = func_closure(o) or ()\n"
    "                for name, cell in zip(func_code(o).co_freevars, cells):\n"
    "                    for v in gc.get_referents(cell):\n"
    "                        add(v, i, '.<closure>.' + name)\n"
    "            else:\n"
    "                for v in gc.get_referents(o):\n"
    "                    add(v, i, None)\n"
    "        except Cut as stop:\n"
    "            cut = stop.args[0]\n"
    "            break\n"
    "        except Exception:\n"
    "            pass\n"
    "        i += 1\n"
    "    visited = i\n"
    "    # Before 3.13 a running function's f_locals is a snapshot dict the frame\n"
    "    # keeps: emptied, it keeps no object alive after the function drops it\n"
    "    # (locals(), f_locals and a trace function's call all refill it first).\n"
    "    for names in snapshots or ():\n"
    "        dict.clear(names)\n"
    "    del snapshots\n"
    "    # Each tensor's storage, and the path that reaches it first.\n"
    "    memo = dict(named)\n"
    "    MODULE_DICTS, inside = ('._modules', '._parameters', '._buffers'), set()\n"
    "    TorchModule = loaded_class('torch.nn', 'Module')\n"
    "    def pattern(i):\n"
    "        chain = []\n"
    "        while i not in memo and i >= 0:\n"
    "            chain.append(i)\n"
    "            i = parents[i]\n"
    "        text = memo.get(i, '')\n"
    "        for j in reversed(chain):\n"
    "            label = labels[j]\n"
    "            if label is None:\n"
    "                label = labels[j] = label_of(nodes[parents[j]], nodes[j])\n"
    "            if label == GRAPH:   # the graph of the tensor that reached it\n"
    "                text = memo[j] = text if text.startswith(GRAPH_OF) else GRAPH_OF + text\n"
    "                continue\n"
    "            if label == '.__dict__' or (label in MODULE_DICTS and TorchModule and\n"
    "                                        issubclass(tp(nodes[parents[j]]), TorchModule)):\n"
    "                inside.add(j)\n"
    "                label = ''\n"
    "            elif j in keys:\n"
    "                # An attribute by its name; a record's entry (outputs[\"preds\"]) by\n"
    "                # its key; a table's (sessions, caches) as [*].\n"
    "                key, p = keys[j], parents[j]\n"
    "                table = dict.__len__(nodes[p]) > RECORD\n"
    "                label = ('.' + key if p in inside else '[*]' if table\n"
    "                         else '[\"%s\"]' % key[:40])\n"
    "            text = memo[j] = text + label\n"
    "        return text\n"
    "    storages, patterns, records = {}, {}, []\n"
    "    def keep(t, path, holder):\n"
    "        try:\n"
    "            if Tensor is not None and issubclass(tp(t), Tensor) and storage is not None:\n"
    "                s = storage(t)\n"
    "                address, size = s.data_ptr(), s.nbytes()\n"
    "            elif Tensor is not None and issubclass(tp(t), Tensor):\n"
    "                address, size = Tensor.data_ptr(t), t.numel() * t.element_size()\n"
    "            elif CupyArray is not None and issubclass(tp(t), CupyArray):\n"
    "                address, size = t.data.ptr, t.nbytes\n"
    "            else:\n"
    "                address, size = t.unsafe_buffer_pointer(), t.on_device_size_in_bytes()\n"
    "        except Exception:\n"
    "            return\n"
    "        if not address:\n"
    "            return\n"
    "        if address in storages:\n"
    "            storages[address][2] += 1\n"
    "            return\n"
    "        key = path + '\\t' + holder\n"
    "        if not (path + holder).isprintable():   # keys, names the program made: no escapes\n"
    "            key = ''.join(c if c.isprintable() or c == '\\t' else '?' for c in key)\n"
    "        storages[address] = [address, size, 1, patterns.setdefault(key, len(patterns))]\n"
    "    for i in found:\n"
    "        path, p = pattern(i), parents[i]\n"
    "        if p >= 0 and labels[p] == '.__dict__':\n"
    "            p = parents[p]\n"
    "        keep(nodes[i], path, tp(nodes[p]).__name__ if p >= 0 and labels[i] != GRAPH else '')\n"
    "    if not cut:\n"
    "        reached = set(id(nodes[i]) for i in found)\n"
    "        for o in gc.get_objects():\n"
    "            if id(o) not in reached and issubclass(tp(o), ARRAYS):\n"
    "                keep(o, UNREACHED, '')\n"
    "    elapsed = int((clock() - started) * 1000) if clock else 0\n"
    "    del nodes[:], parents[:], labels[:], found[:]\n"
    "    seen.clear()\n"
    "    memo.clear()\n"
    "    keys.clear()\n"
    "    inside.clear()\n"
    "    records = b''.join(a.to_bytes(8, 'little') + s.to_bytes(8, 'little') +\n"
    "                       (n << 32 | k).to_bytes(8, 'little')\n"
    "                       for a, s, n, k in storages.values())\n"
    "    return (records, '\\0'.join(patterns).encode('utf-8', 'replace'), visited, elapsed,\n"
    "            cut.encode())\n"
    "\n"
    "\n"
    "def holders(gc, sys, seconds, limit):\n"
    "    enabled = gc.isenabled()\n"
    "    gc.disable()\n"
    "    try:\n"
    "        return walk(gc, sys, seconds, limit)\n"
    "    finally:\n"
    "        if enabled:\n"
    "            gc.enable()\n";

/* The walk stops after this many objects, whatever its time budget. */
#define HOLDERS_OBJECTS 4000000

static PyObject *classify; /* the compiled functions, kept for the process's life */
static PyObject *retain;

/* With the GIL: `source` compiled in a namespace of its own, once; its
 * function `name`. */
static PyObject *compiled(PyObject **function, const char *source, const char *name)
{
    if (*function)
        return *function;
    PyObject *builtins = py.import("builtins");
    PyObject *scope = builtins ? py.build_value("{}") : NULL;
    PyObject *done = scope ? py.call_method(builtins, "exec", "sO", source, scope) : NULL;
    PyObject *found = done ? py.dict_get(scope, name) : NULL; /* borrowed */
    if (found) {
        py.incref(found);
        *function = found;
    }
    py_release(done);
    py_release(scope);
    py_release(builtins);
    return *function;
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

/* How many strings text[0..bytes) holds, one after another, each ended by
 * a NUL but the last (the copies below end it). */
static size_t strings_in(const char *text, py_ssize bytes)
{
    size_t count = bytes > 0 ? 1 : 0;
    for (py_ssize i = 0; i < bytes; i++)
        count += text[i] == '\0';
    return count;
}

/* strings[0..count) pointed at the strings of `copy`, in order. */
static void split_strings(char *copy, const char **strings, size_t count)
{
    for (size_t i = 0, at = 0; i < count; i++) {
        strings[i] = copy + at;
        at += strlen(copy + at) + 1;
    }
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
    size_t count = (size_t)record_bytes / 24, names = strings_in(text, text_bytes);
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
        memcpy(field, records + i * 24, sizeof(field)); /* little-endian, as packed */
        uint32_t owner = (uint32_t)field[2], kind = (uint32_t)(field[2] >> 32);
        if (owner >= names || kind >= TENSOR_CLASSES)
            continue;
        c->tensors[c->count++] = (struct torch_tensor_ref){field[0], field[1], owner, kind};
    }
    qsort(c->tensors, c->count, sizeof(*c->tensors), by_address);
    split_strings(copy, c->names, names);
    c->name_count = (uint32_t)names;
    if (!c->modules && !c->optimizers)
        c->why = "the program holds no nn.Module or optimizer";
    return c;
}

static struct torch_holders *no_holders(const char *why)
{
    struct torch_holders *h = pages_alloc(sizeof(*h));
    if (h) {
        memset(h, 0, sizeof(*h));
        h->mapped = sizeof(*h);
        h->why = why;
    }
    return h;
}

/* RETAIN's answer (records, paths, objects, ms, cut) in one mapping. */
static struct torch_holders *unpack_holders(PyObject *answer)
{
    char *records, *text, *cut;
    py_ssize record_bytes, text_bytes, cut_bytes;
    PyObject *objects = py.tuple_item(answer, 2), *ms = py.tuple_item(answer, 3);
    if (!objects || !ms || py.bytes_data(py.tuple_item(answer, 0), &records, &record_bytes) < 0 ||
        py.bytes_data(py.tuple_item(answer, 1), &text, &text_bytes) < 0 ||
        py.bytes_data(py.tuple_item(answer, 4), &cut, &cut_bytes) < 0)
        return no_holders("reading the walk's answer failed");
    size_t count = (size_t)record_bytes / 24, paths = strings_in(text, text_bytes);
    if (count > UINT32_MAX || paths > UINT32_MAX)
        return no_holders("more tensors than a report can name");
    size_t bytes = sizeof(struct torch_holders) + count * sizeof(struct torch_holder_ref) +
                   2 * paths * sizeof(char *) + (size_t)text_bytes + 1;
    struct torch_holders *h = pages_alloc(bytes);
    if (!h)
        return NULL;
    memset(h, 0, sizeof(*h));
    h->mapped = bytes;
    h->objects = py.as_unsigned(objects);
    h->ms = (uint32_t)py.as_unsigned(ms);
    snprintf(h->cut, sizeof(h->cut), "%.*s", (int)(cut_bytes < 47 ? cut_bytes : 47), cut);
    h->refs = (struct torch_holder_ref *)(h + 1);
    h->paths = (const char **)(h->refs + count);
    h->containers = h->paths + paths;
    char *copy = (char *)(h->containers + paths);
    memcpy(copy, text, (size_t)text_bytes);
    copy[text_bytes] = '\0';
    split_strings(copy, h->paths, paths);
    for (size_t i = 0; i < paths; i++) {
        char *tab = strchr(h->paths[i], '\t'); /* "path\tcontainer" */
        h->containers[i] = tab ? tab + 1 : "";
        if (tab)
            *tab = '\0';
    }
    h->path_count = (uint32_t)paths;
    for (size_t i = 0; i < count; i++) {
        uint64_t field[3];
        memcpy(field, records + i * 24, sizeof(field)); /* little-endian, as packed */
        uint32_t path = (uint32_t)field[2], tensors = (uint32_t)(field[2] >> 32);
        if (path < paths)
            h->refs[h->count++] = (struct torch_holder_ref){field[0], field[1], path, tensors};
    }
    return h;
}

/* With the GIL: who holds the tensors, walked now (RETAIN). NULL when out
 * of memory. */
static struct torch_holders *holders_read(PyObject *gc)
{
    PyObject *sys = py.import("sys");
    PyObject *function = sys ? compiled(&retain, RETAIN, "holders") : NULL;
    PyObject *seconds = function ? py.build_value("d", config.holders_ms / 1000.0) : NULL;
    PyObject *limit = seconds ? py.build_value("i", HOLDERS_OBJECTS) : NULL;
    PyObject *answer = limit ? py.call_function(function, gc, sys, seconds, limit, NULL) : NULL;
    struct torch_holders *h = answer ? unpack_holders(answer)
                                     : no_holders("the walk from Python's roots raised an "
                                                  "exception");
    py_release(answer);
    py_release(limit);
    py_release(seconds);
    py_release(sys);
    py.clear();
    return h;
}

struct torch_holders *torch_holders_read(void)
{
    PyObject *gc = py.import("gc");
    struct torch_holders *h = gc ? holders_read(gc) : no_holders("Python's gc is not there");
    py_release(gc);
    py.clear();
    return h;
}

void torch_holders_free(struct torch_holders *h)
{
    if (h)
        pages_free(h, h->mapped);
}

/* With the GIL: what `torch`'s live tensors are (CLASSIFY). */
static struct torch_classes *classes_of(PyObject *torch, PyObject *gc)
{
    PyObject *nn = py_attr(torch, "nn"), *optim = py_attr(torch, "optim");
    PyObject *main = py.dict_get(py.module_dict(), "__main__"); /* borrowed */
    PyObject *function =
        nn && optim && gc && main ? compiled(&classify, CLASSIFY, "classify") : NULL;
    PyObject *answer = function ? py.call_function(function, torch, gc, main, NULL) : NULL;
    struct torch_classes *c =
        answer ? unpack(answer)
               : empty(!nn || !optim ? "torch.nn or torch.optim is not loaded"
                                     : "reading PyTorch's modules and optimizers "
                                       "raised an exception");
    py_release(answer);
    py_release(optim);
    py_release(nn);
    py.clear();
    return c;
}

struct torch_classes *torch_classes_read(void)
{
    PyObject *torch = py_imported("torch"); /* borrowed */
    PyObject *gc = py.import("gc");
    struct torch_classes *c = torch ? classes_of(torch, gc) : empty("PyTorch is not imported");
    if (c && gc && config.holders)
        c->holders = holders_read(gc);
    py_release(gc);
    py.clear();
    return c;
}

void torch_classes_free(struct torch_classes *c)
{
    if (!c)
        return;
    torch_holders_free(c->holders);
    pages_free(c, c->mapped);
}
