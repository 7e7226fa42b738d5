/* test_frames.c - frame origins, the site of a stack and hidden frames
 * (src/report/frames.c) on hand-made stacks: a PyTorch step seen from
 * Python, a PyTorch autograd thread with no Python (unwound, or named by
 * its backward node), a C program, a CuPy
 * call, a stack of the standard library only. */
#include <string.h>

#include "check.h"
#include "frames.h"
#include "python.h"
#include "report.h"

#define MAX_FRAMES 64

/* A report holding one stack made of `symbols`, innermost first; addresses
 * are given in order, so r->addresses stays sorted. */
struct fixture {
    struct report r;
    struct stack stack;
    uintptr_t frames[MAX_FRAMES], addresses[MAX_FRAMES];
    struct symbol symbols[MAX_FRAMES];
    uint8_t origins[MAX_FRAMES];
};

static void build(struct fixture *f, const struct symbol *symbols, uint32_t depth)
{
    memset(f, 0, sizeof(*f));
    for (uint32_t i = 0; i < depth; i++) {
        f->symbols[i] = symbols[i];
        /* Python frames carry the tag; the order of addresses is kept. */
        uintptr_t address = (symbols[i].python ? PYTHON_FRAME_TAG : 0x400000) + 16 * (i + 1);
        f->symbols[i].address = f->addresses[i] = f->frames[i] = address;
        f->origins[i] = (uint8_t)origin_of(&symbols[i], NULL);
    }
    /* Native addresses sort below tagged Python ones: sort the pairs. */
    for (uint32_t i = 1; i < depth; i++)
        for (uint32_t k = i; k > 0 && f->addresses[k - 1] > f->addresses[k]; k--) {
            uintptr_t a = f->addresses[k];
            f->addresses[k] = f->addresses[k - 1];
            f->addresses[k - 1] = a;
            struct symbol s = f->symbols[k];
            f->symbols[k] = f->symbols[k - 1];
            f->symbols[k - 1] = s;
            uint8_t o = f->origins[k];
            f->origins[k] = f->origins[k - 1];
            f->origins[k - 1] = o;
        }
    f->stack.depth = depth;
    f->r.stacks = &f->stack;
    f->r.stack_count = 1;
    f->r.frames = f->frames;
    f->r.addresses = f->addresses;
    f->r.symbols = f->symbols;
    f->r.origins = f->origins;
    f->r.address_count = depth;
}

static long site_of(struct fixture *f)
{
    struct frame_view view;
    frames_view(&f->r, &f->stack, &view);
    return view.site;
}

/* The frames a reader sees by default, as a string of 0/1 (1: shown). */
static const char *shown(struct fixture *f)
{
    static char text[MAX_FRAMES + 1];
    struct frame_view view;
    frames_view(&f->r, &f->stack, &view);
    for (uint32_t i = 0; i < f->stack.depth; i++)
        text[i] = frames_left_out(&f->r, &f->stack, i, &view) ? '0' : '1';
    text[f->stack.depth] = '\0';
    return text;
}

#define NATIVE(function, module)                                                                   \
    {                                                                                              \
        0, function, 0, module, 0, NULL, 0, 0, NULL                                                \
    }
#define PY(function, file, line)                                                                   \
    {                                                                                              \
        0, function, 0, NULL, 0, file, line, 1, NULL                                               \
    }

static void torch_from_python(void)
{
    const char *site = "/home/me/.venv/lib/python3.11/site-packages/torch";
    static struct symbol stack[16];
    struct symbol frames[] = {
        NATIVE("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.12"),
        NATIVE("c10::cuda::CUDACachingAllocator::malloc",
               "/x/site-packages/torch/lib/libc10_cuda.so"),
        NATIVE("at::native::empty_cuda", "/x/site-packages/torch/lib/libtorch_cuda.so"),
        NATIVE("at::_ops::linear::call", "/x/site-packages/torch/lib/libtorch_cpu.so"),
        NATIVE("torch::autograd::THPVariable_linear",
               "/x/site-packages/torch/lib/libtorch_python.so"),
        PY("forward", NULL, 116), /* torch/nn/modules/linear.py */
        PY("Module._call_impl", NULL, 1527),
        PY("forward", "/home/me/model.py", 30), /* the site */
        PY("Module._call_impl", NULL, 1527),
        PY("train", "/home/me/train.py", 50),
        PY("<module>", "<frozen runpy>", 88),
        NATIVE("_start", "/usr/bin/python3.11"),
    };
    char linear[128], module[128];
    snprintf(linear, sizeof(linear), "%s/nn/modules/linear.py", site);
    snprintf(module, sizeof(module), "%s/nn/modules/module.py", site);
    frames[5].file = linear;
    frames[6].file = module;
    frames[8].file = module;
    uint32_t depth = sizeof(frames) / sizeof(frames[0]);
    memcpy(stack, frames, sizeof(frames));
    struct fixture f;
    build(&f, stack, depth);
    CHECK_EQ(site_of(&f), 7);
    CHECK_EQ(origin_of(&stack[1], NULL), ORIGIN_FRAMEWORK);
    CHECK_EQ(origin_of(&stack[5], NULL), ORIGIN_FRAMEWORK);
    CHECK_EQ(origin_of(&stack[10], NULL), ORIGIN_INTERPRETER);
    CHECK_EQ(origin_of(&stack[11], NULL), ORIGIN_STARTUP);
    /* cudaMalloc; linear.py's forward (what the site called); the user's lines */
    CHECK(strcmp(shown(&f), "100001010100") == 0);
    f.r.all_frames = 1;
    CHECK(strcmp(shown(&f), "111111111111") == 0);
}

static void autograd_thread(void)
{
    struct symbol frames[] = {
        NATIVE(NULL, "/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
        NATIVE("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.12"),
        NATIVE("c10::cuda::CUDACachingAllocator::malloc",
               "/x/site-packages/torch/lib/libc10_cuda.so"),
        NATIVE("torch::autograd::Engine::thread_main",
               "/x/site-packages/torch/lib/libtorch_cpu.so"),
        NATIVE("execute_native_thread_routine", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"),
        NATIVE("start_thread", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
        NATIVE("__clone3", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
    };
    struct fixture f;
    build(&f, frames, 7);
    /* No code of the user's: the innermost frame outside CUDA. */
    CHECK_EQ(site_of(&f), 2);
    CHECK_EQ(origin_of(&frames[4], NULL), ORIGIN_SYSTEM);
    CHECK_EQ(origin_of(&frames[5], NULL), ORIGIN_STARTUP);
    CHECK(strcmp(shown(&f), "0110000") == 0);
}

static void c_program(void)
{
    struct symbol frames[] = {
        NATIVE("cudaMalloc", "/opt/sim/libcudart.so.13"),
        NATIVE("leak_scratch_buffer", "/home/me/leak_loop"),
        NATIVE("main", "/home/me/leak_loop"),
        NATIVE("__libc_start_call_main", "/lib/x86_64-linux-gnu/libc.so.6"),
        NATIVE("__libc_start_main@@GLIBC_2.34", "/lib/x86_64-linux-gnu/libc.so.6"),
        NATIVE("_start", "/home/me/leak_loop"),
    };
    struct fixture f;
    build(&f, frames, 6);
    CHECK_EQ(site_of(&f), 1);
    CHECK(strcmp(shown(&f), "111000") == 0);
}

static void cupy_and_ctypes(void)
{
    struct symbol frames[] = {
        NATIVE("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.12"),
        NATIVE(
            NULL,
            "/usr/lib/python3/dist-packages/cupy_backends/cuda/api/runtime.cpython-311-x86_64-linux-gnu.so"),
        NATIVE(NULL, "/usr/lib/x86_64-linux-gnu/libffi.so.8"),
        NATIVE("PyCFuncPtr_call",
               "/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so"),
        PY("_malloc", "/usr/lib/python3/dist-packages/cupy/_core/core.py", 10),
        PY("zeros", "/usr/lib/python3/dist-packages/yourlib/ops.py", 7), /* not a framework */
        PY("main", "/srv/job.py", 3),
    };
    struct fixture f;
    build(&f, frames, 7);
    CHECK_EQ(origin_of(&frames[1], NULL), ORIGIN_FRAMEWORK);
    CHECK_EQ(origin_of(&frames[2], NULL), ORIGIN_INTERPRETER);
    CHECK_EQ(origin_of(&frames[3], NULL), ORIGIN_INTERPRETER);
    CHECK_EQ(origin_of(&frames[5], NULL), ORIGIN_LIBRARY);
    /* An installed package that is not a framework's is a library: the
     * site is the line that called it, the library frame kept, and the
     * framework call inside it. */
    CHECK_EQ(site_of(&f), 6);
    CHECK(strcmp(shown(&f), "1000111") == 0);
    char text[256];
    frames_site_text(&f.r, 1, text, sizeof(text));
    /* The library path names the framework's Python it goes through. */
    CHECK(strcmp(text, "/srv/job.py:3 in main (via yourlib, cupy: zeros:7)") == 0);
    /* Named as the user's own: the site again. */
    CHECK_EQ(origin_of(&frames[5], "transformers, yourlib"), ORIGIN_USER);
    CHECK_EQ(origin_of(&frames[5], "yourli,ourlib"), ORIGIN_LIBRARY);
    CHECK_EQ(origin_of(&frames[4], "yourlib"), ORIGIN_FRAMEWORK);
    CHECK_EQ(origin_of(&frames[4], "cupy"), ORIGIN_USER);
}

/* A server's line calling a package's generate(), whose model runs under
 * PyTorch's Module call and asks for the memory in its cache's update():
 * the site is the user's line, the whole path between folded into "via",
 * PyTorch's frames on it named, nothing after it. Through the standard
 * library alone, "stdlib" is named like a package. */
static void library_path(void)
{
    struct symbol frames[] = {
        NATIVE("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.12"),
        NATIVE("at::_ops::cat::call", "/x/site-packages/torch/lib/libtorch_cpu.so"),
        PY("DynamicLayer.update", "/x/site-packages/transformers/cache_utils.py", 146),
        PY("Module._call_impl", "/x/site-packages/torch/nn/modules/module.py", 1790),
        PY("GenerationMixin.generate", "/x/site-packages/transformers/generation/utils.py", 2500),
        PY("decorate_context", "/x/site-packages/torch/utils/_contextlib.py", 120),
        PY("serve", "/srv/check_user_line.py", 51),
    };
    struct fixture f;
    build(&f, frames, 7);
    CHECK_EQ(site_of(&f), 6);
    char text[256];
    frames_site_text(&f.r, 1, text, sizeof(text));
    CHECK(strcmp(text, "/srv/check_user_line.py:51 in serve (via transformers, torch: "
                       "GenerationMixin.generate -> DynamicLayer.update:146)") == 0);

    struct symbol stdlib[] = {
        NATIVE("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.12"),
        PY("ExitStack.__exit__", "/usr/lib/python3.11/contextlib.py", 601),
        PY("grab", "/srv/job.py", 9),
    };
    build(&f, stdlib, 3);
    CHECK_EQ(site_of(&f), 2);
    CHECK(strcmp(shown(&f), "111") == 0);
    frames_site_text(&f.r, 1, text, sizeof(text));
    CHECK(strcmp(text, "/srv/job.py:9 in grab (via stdlib: ExitStack.__exit__:601)") == 0);
}

static void standard_library_only(void)
{
    struct symbol frames[] = {
        NATIVE("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.12"),
        PY("run", "/usr/lib/python3.11/threading.py", 982),
        PY("_bootstrap", "/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py", 1002),
        PY("[main thread, at that moment]", "<this thread runs no Python>", 0),
        NATIVE("helper", "/home/me/libmine.so"),
    };
    struct fixture f;
    build(&f, frames, 5);
    CHECK_EQ(origin_of(&frames[1], NULL), ORIGIN_INTERPRETER);
    CHECK_EQ(origin_of(&frames[2], NULL), ORIGIN_INTERPRETER);
    /* No Python line of the user's (a marker has line 0): the native one. */
    CHECK_EQ(site_of(&f), 4);
    /* the marker is a placeholder, never shown as a frame */
    CHECK(strcmp(shown(&f), "10001") == 0);
    f.r.all_frames = 1;
    CHECK(strcmp(shown(&f), "11101") == 0);
}

/* A tensor's stack from PyTorch's trace tracker: it starts in the tracer's
 * own hook, which is never shown. */
static void tracer_hook(void)
{
    struct symbol frames[] = {
        NATIVE("forward", "/opt/cumemtrace/lib/libcumemtrace_torch.so"),
        NATIVE("c10::cuda::CUDACachingAllocator::malloc",
               "/x/site-packages/torch/lib/libc10_cuda.so"),
        PY("forward", "/x/site-packages/torch/nn/modules/linear.py", 134),
        PY("step", "/srv/train.py", 43),
    };
    struct fixture f;
    build(&f, frames, 4);
    CHECK_EQ(origin_of(&frames[0], NULL), ORIGIN_SYSTEM);
    CHECK(strcmp(shown(&f), "0011") == 0);
}

/* What an autograd engine thread's stack continues with: the marker, then
 * the main thread's frames, waiting in loss.backward() (train.py:46). */
#define BORROWED_FROM_MAIN_THREAD                                                                  \
    PY("[main thread, at that moment]",                                                            \
       "<this thread runs no Python: the main thread's stack follows>", 0),                        \
        PY("_engine_run_backward", "/x/site-packages/torch/autograd/graph.py", 869),               \
        PY("Tensor.backward", "/x/site-packages/torch/_tensor.py", 648),                           \
        PY("step", "/srv/train.py", 46), PY("<module>", "/srv/train.py", 80)

/* A tensor PyTorch's autograd engine allocates: no Python on its thread, so
 * its stack is the tracer's hook, the allocator, the engine, thread start,
 * then the main thread's Python frames after a marker (python.c). The site
 * is the main thread's line, not the marker; the engine's frames hidden. */
static void autograd_tensor(void)
{
    struct symbol frames[] = {
        NATIVE("forward_block", "/opt/cumemtrace/lib/libcumemtrace_torch.so"),
        NATIVE("c10::cuda::CUDACachingAllocator::malloc",
               "/x/site-packages/torch/lib/libc10_cuda.so"),
        NATIVE("torch::autograd::Engine::thread_main",
               "/x/site-packages/torch/lib/libtorch_cpu.so"),
        NATIVE("execute_native_thread_routine", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"),
        NATIVE("start_thread", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
        NATIVE("__clone3", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
        BORROWED_FROM_MAIN_THREAD,
    };
    struct fixture f;
    build(&f, frames, 11);
    CHECK_EQ(origin_of(&frames[6], NULL), ORIGIN_USER);
    CHECK_EQ(site_of(&f), 9);
    /* backward's engine call is the one framework call kept; the marker is
     * no frame (the writers say in words whose frames follow it) */
    CHECK(strcmp(shown(&f), "00000001011") == 0);
}

/* A tensor the engine made for a backward node: the node's apply() as its
 * one native frame (the tracker library's), kept in view before the marker:
 * it is what tells apart the tensors of one backward() line. */
static void autograd_node(void)
{
    struct symbol frames[] = {
        NATIVE("torch::autograd::generated::AddmmBackward0::apply",
               "/x/site-packages/torch/lib/libtorch_cpu.so"),
        BORROWED_FROM_MAIN_THREAD,
    };
    struct fixture f;
    build(&f, frames, 6);
    CHECK_EQ(site_of(&f), 4);
    CHECK(strcmp(shown(&f), "101011") == 0);
}

/* The same engine thread when the main thread's frames could not be read:
 * the site is the allocator's frame, never the tracer's hook under it. */
static void autograd_tensor_alone(void)
{
    struct symbol frames[] = {
        NATIVE("forward_block", "/opt/cumemtrace/lib/libcumemtrace_torch.so"),
        NATIVE("c10::cuda::CUDACachingAllocator::malloc",
               "/x/site-packages/torch/lib/libc10_cuda.so"),
        NATIVE("torch::autograd::Engine::thread_main",
               "/x/site-packages/torch/lib/libtorch_cpu.so"),
        NATIVE("start_thread", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
        NATIVE("__clone3", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
    };
    struct fixture f;
    build(&f, frames, 5);
    CHECK_EQ(site_of(&f), 1);
    CHECK(strcmp(shown(&f), "01000") == 0);
}

/* torch.compile: the tensor is made by Inductor's generated module, run
 * from an FX graph and Dynamo's frames; the site is the user's line that
 * called the compiled model, and the generated lines are hidden but the
 * one that names what was asked for. */
static void compiled(void)
{
    const char *site = "/home/me/.venv/lib/python3.12/site-packages";
    char dynamo[128];
    snprintf(dynamo, sizeof(dynamo), "%s/torch/_dynamo/eval_frame.py", site);
    struct symbol frames[] = {
        NATIVE("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.12"),
        NATIVE("c10::cuda::CUDACachingAllocator::malloc",
               "/x/site-packages/torch/lib/libc10_cuda.so"),
        PY("call", "/tmp/torchinductor_me/c5/c5m5xyz.py", 124),
        PY("Runner.call", "/tmp/torchinductor_me/c5/c5m5xyz.py", 140),
        PY("forward", "<eval_with_key>.3", 7),
        NATIVE("launcher", "/home/me/.triton/cache/Q2X/__triton_launcher.so"),
        PY("_fn", "/src/pytorch/torch/_dynamo/eval_frame.py", 600), /* a source checkout */
        PY("_fn", dynamo, 655),
        PY("train", "/home/me/train.py", 41), /* the site */
        PY("<module>", "/home/me/train.py", 60),
    };
    struct fixture f;
    build(&f, frames, 10);
    for (int i = 2; i < 8; i++)
        CHECK_EQ(origin_of(&frames[i], NULL), ORIGIN_FRAMEWORK);
    CHECK_EQ(origin_of(&frames[8], NULL), ORIGIN_USER);
    CHECK_EQ(site_of(&f), 8);
    CHECK(strcmp(shown(&f), "1010000011") == 0);
    /* A user's file merely named like a cache is still the user's. */
    struct symbol mine = PY("f", "/home/me/inductor_notes.py", 3);
    CHECK_EQ(origin_of(&mine, NULL), ORIGIN_USER);
}

static void names(void)
{
    char text[128];
    struct symbol unresolved = NATIVE(NULL, "/usr/lib/x86_64-linux-gnu/libffi.so.8");
    unresolved.module_offset = 0x6f7a;
    frames_name(&unresolved, 0x7f5873cbbf7a, text, sizeof(text));
    CHECK(strcmp(text, "libffi.so.8+0x6f7a") == 0);
    struct symbol python = PY("allocate", "/srv/job.py", 22);
    frames_name(&python, 0, text, sizeof(text));
    CHECK(strcmp(text, "allocate (/srv/job.py:22)") == 0);
    struct symbol marker = PY("[main thread, at that moment]",
                              "<this thread runs no Python: the main thread's stack follows>", 0);
    frames_name(&marker, 0, text, sizeof(text));
    CHECK(strcmp(text, "[main thread, at that moment]") == 0);
    frames_name(NULL, 0x1234, text, sizeof(text));
    CHECK(strcmp(text, "0x1234") == 0);
}

int main(void)
{
    torch_from_python();
    autograd_thread();
    c_program();
    cupy_and_ctypes();
    library_path();
    standard_library_only();
    tracer_hook();
    autograd_tensor();
    autograd_node();
    autograd_tensor_alone();
    compiled();
    names();
    return check_done("frames");
}
