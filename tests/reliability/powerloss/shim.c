// An LD_PRELOAD shim that records every change a process makes to the files of one directory,
// and every fsync/fdatasync of them, to a journal, for tests/reliability/powerloss.py to work
// out what a power loss at the moment the process died would have left on disk.
//
// The process's own writes go through to the files unchanged (it reads back what it wrote).
// The journal is written with plain write(2) to a file outside the directory: it is the test's
// record of what the disk was asked to do, not part of the disk, so it survives the process's
// SIGKILL through the page cache.
//
//   POWERLOSS_DIR=/abs/dir POWERLOSS_JOURNAL=/abs/journal LD_PRELOAD=shim.so the-server ...
//
// Journal records, little-endian: a one-byte kind, then
//   'W' write:     u64 seq, u32 path length, path, u64 offset, u32 length, bytes
//   'T' truncate:  u64 seq, u32 path length, path, u64 new length
//   'S' sync:      u64 seq, u32 path length, path, u64 first seq not covered
//   'A' allocate:  u64 seq, u32 path length, path, u64 offset, u64 length
//   'U' unlink:    u64 seq, u32 path length, path
//   'R' rename:    u64 seq, u32 path length, path, u32 length, new path
// A record's seq is its offset in the journal, so it orders records across every process that
// appends (PostgreSQL's server processes write and sync the same files). A sync covers the
// records of its file with a seq below the journal's length when the fsync began: writes that
// completed before it. Each record is one write(2) under a lock that spans the process's threads
// (a mutex) and its other processes (flock on a descriptor of its own, reopened after fork); a
// write's record is appended after the write returned and a sync's after the fsync returned, so
// a process killed in between leaves the operation out, as if it never returned (which, to the
// process, it did not).
//
// Interposed: open/open64/openat/openat64 (O_TRUNC), write, pwrite, pwrite64, writev, pwritev,
// pwritev64, ftruncate, ftruncate64, truncate, fallocate, posix_fallocate, fsync, fdatasync,
// syncfs, sync, unlink, unlinkat, rename, renameat, close. A descriptor's path is read from
// /proc/self/fd once and kept until it is closed. Writes through a shared mapping are not seen
// (SQLite maps only its -shm index, which the model drops).

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FDS 65536

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char dir[PATH_MAX];
static size_t dir_len;
static int journal = -1;
static char journal_path[PATH_MAX];
// The record being built, written whole by finish().
static char *record;
static size_t record_len, record_cap;
static int record_open;
// Per descriptor: 0 unknown, 1 tracked (path in paths[fd]), 2 not in the directory.
static unsigned char state[MAX_FDS];
static char *paths[MAX_FDS];
// A tracked descriptor's file, checked before each record: a number closed where this shim does
// not see it (inside libc) and opened again for another file is looked up afresh.
static dev_t devs[MAX_FDS];
static ino_t inos[MAX_FDS];

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev64)(int, const struct iovec *, int, off_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off_t);
static int (*real_truncate)(const char *, off_t);
static int (*real_fallocate)(int, int, off_t, off_t);
static int (*real_posix_fallocate)(int, off_t, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_syncfs)(int);
static void (*real_sync)(void);
static int (*real_unlink)(const char *);
static int (*real_unlinkat)(int, const char *, int);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);
static int (*real_close)(int);
static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);

static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&lock); }

// A child shares its parent's open file description, and with it the parent's flock: it opens
// the journal again to lock apart from it.
static void after_fork_child(void) {
    if (journal >= 0) {
        real_close(journal);
        journal = real_open(journal_path, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (journal < 0) {
            abort();
        }
    }
    pthread_mutex_unlock(&lock);
}

static void setup(void) {
#define LOAD(name) real_##name = dlsym(RTLD_NEXT, #name)
    LOAD(write); LOAD(pwrite); LOAD(pwrite64); LOAD(writev); LOAD(pwritev); LOAD(pwritev64);
    LOAD(ftruncate); LOAD(ftruncate64); LOAD(truncate); LOAD(fallocate); LOAD(posix_fallocate);
    LOAD(fsync); LOAD(fdatasync); LOAD(syncfs); LOAD(sync); LOAD(unlink); LOAD(unlinkat);
    LOAD(rename); LOAD(renameat); LOAD(close); LOAD(open); LOAD(open64); LOAD(openat); LOAD(openat64);
#undef LOAD
    const char *d = getenv("POWERLOSS_DIR");
    const char *j = getenv("POWERLOSS_JOURNAL");
    if (d == NULL || j == NULL || d[0] != '/' || strlen(d) + 2 > sizeof dir) {
        return; // not configured: every call passes through
    }
    strcpy(dir, d);
    dir_len = strlen(dir);
    while (dir_len > 1 && dir[dir_len - 1] == '/') {
        dir[--dir_len] = '\0';
    }
    snprintf(journal_path, sizeof journal_path, "%s", j);
    journal = real_open(j, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (journal < 0) {
        fprintf(stderr, "powerloss shim: cannot open the journal %s\n", j);
        abort();
    }
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

static void init(void) { pthread_once(&once, setup); }

// Whether an absolute path names a file inside the directory.
static int inside(const char *path) {
    return journal >= 0 && path != NULL && strncmp(path, dir, dir_len) == 0 && path[dir_len] == '/';
}

// Forgets what is known of `fd` (closed, opened again, or another file now): its path is looked
// up afresh at its next write. Called with the lock held.
static void forget(int fd) {
    if (state[fd] == 1) {
        free(paths[fd]);
        paths[fd] = NULL;
    }
    state[fd] = 0;
}

// The tracked path of `fd`, or NULL. Called with the lock held.
static const char *fd_path(int fd) {
    if (journal < 0 || fd < 0 || fd >= MAX_FDS || fd == journal) {
        return NULL;
    }
    struct stat st;
    if (state[fd] == 1 && (fstat(fd, &st) != 0 || st.st_dev != devs[fd] || st.st_ino != inos[fd])) {
        forget(fd);
    }
    if (state[fd] == 0) {
        char link[64], target[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        state[fd] = 2;
        if (n > 0) {
            target[n] = '\0';
            if (inside(target) && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
                paths[fd] = strdup(target);
                state[fd] = paths[fd] != NULL ? 1 : 2;
                devs[fd] = st.st_dev;
                inos[fd] = st.st_ino;
            }
        }
    }
    return state[fd] == 1 ? paths[fd] : NULL;
}

// The absolute form of `path` relative to `dirfd` (or the working directory), in `out`.
static const char *absolute(int dirfd, const char *path, char *out) {
    if (path == NULL) {
        return NULL;
    }
    if (path[0] == '/') {
        snprintf(out, PATH_MAX, "%s", path);
        return out;
    }
    char base[PATH_MAX];
    if (dirfd == AT_FDCWD) {
        if (getcwd(base, sizeof base) == NULL) {
            return NULL;
        }
    } else {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
        ssize_t n = readlink(link, base, sizeof base - 1);
        if (n <= 0) {
            return NULL;
        }
        base[n] = '\0';
    }
    int n = snprintf(out, PATH_MAX, "%s/%.*s", base, PATH_MAX - 2, path);
    return n > 0 && n < PATH_MAX ? out : NULL;
}

static void put(const void *bytes, size_t len) {
    if (record_len + len > record_cap) {
        size_t cap = record_cap ? record_cap : 4096;
        while (cap < record_len + len) {
            cap *= 2;
        }
        record = realloc(record, cap);
        if (record == NULL) {
            abort();
        }
        record_cap = cap;
    }
    memcpy(record + record_len, bytes, len);
    record_len += len;
}

// The journal's length: the next record's seq. Called with the lock and the flock held.
static uint64_t journal_end(void) {
    off_t end = lseek(journal, 0, SEEK_END);
    return end < 0 ? 0 : (uint64_t)end;
}

// The seq the next record would get, for a sync about to begin. Called with the lock held.
static uint64_t next_seq(void) {
    flock(journal, LOCK_EX);
    uint64_t seq = journal_end();
    flock(journal, LOCK_UN);
    return seq;
}

// Writes the record being built, if any, in one write, and releases the flock and the lock.
static void finish(void) {
    if (record_open) {
        const char *p = record;
        size_t len = record_len;
        while (len > 0) {
            ssize_t n = real_write(journal, p, len);
            if (n < 0) {
                if (errno == EINTR) {
                    continue;
                }
                fprintf(stderr, "powerloss shim: the journal write failed\n");
                abort();
            }
            p += n;
            len -= (size_t)n;
        }
        flock(journal, LOCK_UN);
        record_open = 0;
    }
    pthread_mutex_unlock(&lock);
}

static void u32(uint32_t v) { put(&v, 4); }
static void u64(uint64_t v) { put(&v, 8); }

// Starts a record: its kind, seq and path; finish() writes it. Called with the lock held.
static void head(char kind, const char *path) {
    flock(journal, LOCK_EX);
    record_open = 1;
    record_len = 0;
    put(&kind, 1);
    u64(journal_end());
    u32((uint32_t)strlen(path));
    put(path, strlen(path));
}

// Where a write at the descriptor's position went, read after the write (O_APPEND included) as
// the position less what was written.
#define AT_POSITION ((off_t)-1)

static void record_write(int fd, off_t offset, const struct iovec *iov, int count, ssize_t done) {
    if (done <= 0 || journal < 0 || fd == journal) {
        return;
    }
    pthread_mutex_lock(&lock);
    const char *path = fd_path(fd);
    if (path != NULL) {
        if (offset == AT_POSITION) {
            off_t end = lseek(fd, 0, SEEK_CUR);
            offset = end < 0 ? 0 : end - done;
        }
        head('W', path);
        u64((uint64_t)offset);
        u32((uint32_t)done);
        size_t left = (size_t)done;
        for (int i = 0; i < count && left > 0; i++) {
            size_t n = iov[i].iov_len < left ? iov[i].iov_len : left;
            put(iov[i].iov_base, n);
            left -= n;
        }
    }
    finish();
}

ssize_t write(int fd, const void *buf, size_t len) {
    init();
    ssize_t done = real_write(fd, buf, len);
    struct iovec iov = {(void *)buf, len};
    record_write(fd, AT_POSITION, &iov, 1, done);
    return done;
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t offset) {
    init();
    ssize_t done = real_pwrite(fd, buf, len, offset);
    struct iovec iov = {(void *)buf, len};
    record_write(fd, offset, &iov, 1, done);
    return done;
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t offset) {
    init();
    ssize_t done = real_pwrite64(fd, buf, len, offset);
    struct iovec iov = {(void *)buf, len};
    record_write(fd, offset, &iov, 1, done);
    return done;
}

ssize_t writev(int fd, const struct iovec *iov, int count) {
    init();
    ssize_t done = real_writev(fd, iov, count);
    record_write(fd, AT_POSITION, iov, count, done);
    return done;
}

ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
    init();
    ssize_t done = real_pwritev(fd, iov, count, offset);
    record_write(fd, offset, iov, count, done);
    return done;
}

ssize_t pwritev64(int fd, const struct iovec *iov, int count, off_t offset) {
    init();
    ssize_t done = real_pwritev64(fd, iov, count, offset);
    record_write(fd, offset, iov, count, done);
    return done;
}

static void record_truncate_path(const char *path, off_t length) {
    pthread_mutex_lock(&lock);
    head('T', path);
    u64((uint64_t)length);
    finish();
}

static void record_truncate(int fd, off_t length) {
    pthread_mutex_lock(&lock);
    const char *path = fd_path(fd);
    if (path != NULL) {
        head('T', path);
        u64((uint64_t)length);
    }
    finish();
}

int ftruncate(int fd, off_t length) {
    init();
    int r = real_ftruncate(fd, length);
    if (r == 0) {
        record_truncate(fd, length);
    }
    return r;
}

int ftruncate64(int fd, off_t length) {
    init();
    int r = real_ftruncate64(fd, length);
    if (r == 0) {
        record_truncate(fd, length);
    }
    return r;
}

int truncate(const char *path, off_t length) {
    init();
    int r = real_truncate(path, length);
    char abs[PATH_MAX];
    if (r == 0 && inside(absolute(AT_FDCWD, path, abs))) {
        record_truncate_path(abs, length);
    }
    return r;
}

static void record_allocate(int fd, off_t offset, off_t length) {
    pthread_mutex_lock(&lock);
    const char *path = fd_path(fd);
    if (path != NULL) {
        head('A', path);
        u64((uint64_t)offset);
        u64((uint64_t)length);
    }
    finish();
}

int fallocate(int fd, int mode, off_t offset, off_t length) {
    init();
    int r = real_fallocate(fd, mode, offset, length);
    if (r == 0 && mode == 0) {
        record_allocate(fd, offset, length);
    }
    return r;
}

int posix_fallocate(int fd, off_t offset, off_t length) {
    init();
    int r = real_posix_fallocate(fd, offset, length);
    if (r == 0) {
        record_allocate(fd, offset, length);
    }
    return r;
}

// A sync of `fd` (fdatasync when `data`): the first seq it does not cover is taken before the
// sync starts.
static int synced(int fd, int data) {
    init();
    pthread_mutex_lock(&lock);
    const char *path = fd_path(fd);
    char *copy = path != NULL ? strdup(path) : NULL;
    uint64_t before = next_seq();
    finish();
    int r = data ? real_fdatasync(fd) : real_fsync(fd);
    if (r == 0 && copy != NULL) {
        pthread_mutex_lock(&lock);
        head('S', copy);
        u64(before);
        finish();
    }
    free(copy);
    return r;
}

int fsync(int fd) { return synced(fd, 0); }
int fdatasync(int fd) { return synced(fd, 1); }

// syncfs and sync make everything durable: one sync record with an empty path.
static void sync_all(uint64_t before) {
    pthread_mutex_lock(&lock);
    head('S', "");
    u64(before);
    finish();
}

int syncfs(int fd) {
    init();
    pthread_mutex_lock(&lock);
    uint64_t before = next_seq();
    finish();
    int r = real_syncfs(fd);
    if (r == 0 && journal >= 0) {
        sync_all(before);
    }
    return r;
}

void sync(void) {
    init();
    pthread_mutex_lock(&lock);
    uint64_t before = next_seq();
    finish();
    real_sync();
    if (journal >= 0) {
        sync_all(before);
    }
}

int unlink(const char *path) {
    init();
    int r = real_unlink(path);
    char abs[PATH_MAX];
    if (r == 0 && inside(absolute(AT_FDCWD, path, abs))) {
        pthread_mutex_lock(&lock);
        head('U', abs);
        finish();
    }
    return r;
}

int unlinkat(int dirfd, const char *path, int flags) {
    init();
    int r = real_unlinkat(dirfd, path, flags);
    char abs[PATH_MAX];
    if (r == 0 && inside(absolute(dirfd, path, abs))) {
        pthread_mutex_lock(&lock);
        head('U', abs);
        finish();
    }
    return r;
}

static void record_rename(const char *from, const char *to) {
    pthread_mutex_lock(&lock);
    head('R', from);
    u32((uint32_t)strlen(to));
    put(to, strlen(to));
    finish();
}

int rename(const char *from, const char *to) {
    init();
    int r = real_rename(from, to);
    char a[PATH_MAX], b[PATH_MAX];
    if (r == 0 && (inside(absolute(AT_FDCWD, from, a)) || inside(absolute(AT_FDCWD, to, b)))) {
        absolute(AT_FDCWD, from, a);
        absolute(AT_FDCWD, to, b);
        record_rename(a, b);
    }
    return r;
}

int renameat(int fromfd, const char *from, int tofd, const char *to) {
    init();
    int r = real_renameat(fromfd, from, tofd, to);
    char a[PATH_MAX], b[PATH_MAX];
    if (r == 0 && (inside(absolute(fromfd, from, a)) || inside(absolute(tofd, to, b)))) {
        absolute(fromfd, from, a);
        absolute(tofd, to, b);
        record_rename(a, b);
    }
    return r;
}

int close(int fd) {
    init();
    if (fd >= 0 && fd < MAX_FDS && journal >= 0) {
        pthread_mutex_lock(&lock);
        forget(fd);
        pthread_mutex_unlock(&lock);
    }
    return real_close(fd);
}

// An open with O_TRUNC empties an existing file: recorded as a truncate to 0 once it succeeded.
// A new descriptor's path is looked up again (its number may have been another file's).
static int opened(int fd, int dirfd, const char *path, int flags) {
    if (fd >= 0 && journal >= 0) {
        pthread_mutex_lock(&lock);
        if (fd < MAX_FDS) {
            forget(fd);
        }
        pthread_mutex_unlock(&lock);
        char abs[PATH_MAX];
        if ((flags & O_TRUNC) && inside(absolute(dirfd, path, abs))) {
            record_truncate_path(abs, 0);
        }
    }
    return fd;
}

#define MODE_ARG(flags)                                                                            \
    mode_t mode = 0;                                                                               \
    if ((flags) & (O_CREAT | O_TMPFILE)) {                                                         \
        va_list ap;                                                                                \
        va_start(ap, flags);                                                                       \
        mode = va_arg(ap, mode_t);                                                                 \
        va_end(ap);                                                                                \
    }

int open(const char *path, int flags, ...) {
    init();
    MODE_ARG(flags);
    return opened(real_open(path, flags, mode), AT_FDCWD, path, flags);
}

int open64(const char *path, int flags, ...) {
    init();
    MODE_ARG(flags);
    return opened(real_open64(path, flags, mode), AT_FDCWD, path, flags);
}

int openat(int dirfd, const char *path, int flags, ...) {
    init();
    MODE_ARG(flags);
    return opened(real_openat(dirfd, path, flags, mode), dirfd, path, flags);
}

int openat64(int dirfd, const char *path, int flags, ...) {
    init();
    MODE_ARG(flags);
    return opened(real_openat64(dirfd, path, flags, mode), dirfd, path, flags);
}
