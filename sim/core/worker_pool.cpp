#include "core/worker_pool.hpp"

#include "core/error.hpp"

#include <poll.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <vector>

namespace zerosim::core {

namespace {

using Clock = std::chrono::steady_clock;

/// Bytes kept of a worker's own output (SimGrid's and the program's messages), for a failure's report.
constexpr std::size_t LOG_TAIL_BYTES = 600;

std::string signal_name(int sig)
{
  switch (sig) {
  case SIGSEGV:
    return "SIGSEGV";
  case SIGABRT:
    return "SIGABRT";
  case SIGBUS:
    return "SIGBUS";
  case SIGFPE:
    return "SIGFPE";
  case SIGILL:
    return "SIGILL";
  case SIGKILL:
    return "SIGKILL";
  case SIGTERM:
    return "SIGTERM";
  default:
    return "signal " + std::to_string(sig);
  }
}

// The child's answer on its pipe: a status word on the first line, then the payload (DONE) or the message.
const char* status_word(WorkStatus s)
{
  switch (s) {
  case WorkStatus::DONE:
    return "DONE";
  case WorkStatus::UNSUPPORTED:
    return "UNSUPPORTED";
  case WorkStatus::REJECTED:
    return "REJECTED";
  case WorkStatus::FAILED:
  case WorkStatus::TIMED_OUT:
    break;
  }
  return "FAILED";
}

void write_all(int fd, const std::string& s)
{
  std::size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    off += static_cast<std::size_t>(n);
  }
}

/// The worker: runs the work and writes its answer; never returns.
[[noreturn]] void worker_main(std::size_t item, const WorkFunction& work, int result_fd, int log_fd)
{
  // Default dispositions: a crash ends this process with its signal, which the parent reports.
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTERM})
    std::signal(sig, SIG_DFL);
  // No core file for a crashing item: the parent reports the signal.
  struct rlimit no_core = {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  ::dup2(log_fd, STDOUT_FILENO);
  ::dup2(log_fd, STDERR_FILENO);
  std::string answer;
  try {
    answer = std::string(status_word(WorkStatus::DONE)) + "\n" + work(item);
  } catch (const UnsupportedError& e) {
    answer = std::string(status_word(WorkStatus::UNSUPPORTED)) + "\n" + e.what();
  } catch (const InputError& e) {
    answer = std::string(status_word(WorkStatus::REJECTED)) + "\n" + e.what();
  } catch (const std::exception& e) {
    answer = std::string(status_word(WorkStatus::FAILED)) + "\n" + e.what();
  } catch (...) {
    answer = "FAILED\nan exception that is not a std::exception";
  }
  write_all(result_fd, answer);
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  ::_exit(0);
}

struct Worker {
  std::size_t item = 0;
  pid_t pid = -1;
  int result_fd = -1;
  int log_fd = -1;
  std::string result;
  std::string log;
  Clock::time_point start;
};

/// Reads what is there; closes the descriptor at end of file. Keeps only the tail of `keep_tail` > 0.
void read_some(int& fd, std::string& into, std::size_t keep_tail)
{
  if (fd < 0)
    return;
  char buf[8192];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n > 0) {
    into.append(buf, static_cast<std::size_t>(n));
    if (keep_tail > 0 && into.size() > 4 * keep_tail)
      into.erase(0, into.size() - keep_tail);
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    ::close(fd);
    fd = -1;
  }
}

void drain(Worker& w)
{
  while (w.result_fd >= 0)
    read_some(w.result_fd, w.result, 0);
  while (w.log_fd >= 0)
    read_some(w.log_fd, w.log, LOG_TAIL_BYTES);
}

std::string log_tail(const std::string& log)
{
  std::string t = log.size() > LOG_TAIL_BYTES ? log.substr(log.size() - LOG_TAIL_BYTES) : log;
  t = one_line(t);
  return t.empty() ? "" : "; its last output: " + t;
}

WorkOutcome finish(Worker& w, int wait_status)
{
  drain(w);
  WorkOutcome o;
  if (WIFSIGNALED(wait_status)) {
    o.status = WorkStatus::FAILED;
    o.message = "the worker was killed by " + signal_name(WTERMSIG(wait_status)) + log_tail(w.log);
  } else if (w.result.empty()) {
    o.status = WorkStatus::FAILED;
    o.message = "the worker exited with status " + std::to_string(WEXITSTATUS(wait_status)) + " without a result" +
                log_tail(w.log);
  } else {
    const std::size_t eol = w.result.find('\n');
    const std::string word = w.result.substr(0, eol);
    const std::string rest = eol == std::string::npos ? std::string() : w.result.substr(eol + 1);
    if (word == "DONE") {
      o.status = WorkStatus::DONE;
      o.payload = rest;
    } else {
      o.status = word == "UNSUPPORTED" ? WorkStatus::UNSUPPORTED
                 : word == "REJECTED"  ? WorkStatus::REJECTED
                                       : WorkStatus::FAILED;
      o.message = one_line(rest);
      if (o.status == WorkStatus::FAILED)
        o.message += log_tail(w.log);
    }
  }
  o.wall_s = std::chrono::duration<double>(Clock::now() - w.start).count();
  return o;
}

Worker start_worker(std::size_t item, const WorkFunction& work)
{
  int res[2], log[2];
  if (::pipe(res) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  if (::pipe(log) != 0) {
    ::close(res[0]);
    ::close(res[1]);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {res[0], res[1], log[0], log[1]})
      ::close(fd);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(res[0]);
    ::close(log[0]);
    worker_main(item, work, res[1], log[1]);
  }
  ::close(res[1]);
  ::close(log[1]);
  Worker w;
  w.item = item;
  w.pid = pid;
  w.result_fd = res[0];
  w.log_fd = log[0];
  w.start = Clock::now();
  return w;
}

std::string seconds_text(double s)
{
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", s);
  return buf;
}

} // namespace

std::string one_line(std::string s)
{
  for (auto& ch : s)
    if (ch == '\n' || ch == '\r' || ch == '\t')
      ch = ' ';
  return s;
}

WorkSource count_to(std::size_t n)
{
  auto next = std::make_shared<std::size_t>(0);
  return [next, n](std::size_t& item) {
    if (*next >= n)
      return false;
    item = (*next)++;
    return true;
  };
}

void run_pool(const WorkSource& next, const WorkFunction& work, const WorkDone& done, const PoolOptions& options)
{
  const std::size_t jobs = static_cast<std::size_t>(std::max(1, options.jobs));
  std::vector<Worker> active;
  bool exhausted = false;
  while (!exhausted || !active.empty()) {
    if (options.tick)
      options.tick();
    while (!exhausted && active.size() < jobs) {
      std::size_t item = 0;
      if (!next(item)) {
        exhausted = true;
        break;
      }
      active.push_back(start_worker(item, work));
    }
    std::vector<pollfd> fds;
    bool exiting = false; // a worker closed both pipes (it is exiting) and is not reaped yet
    for (const auto& w : active) {
      for (int fd : {w.result_fd, w.log_fd})
        if (fd >= 0)
          fds.push_back(pollfd{fd, POLLIN, 0});
      exiting = exiting || (w.result_fd < 0 && w.log_fd < 0);
    }
    // While a worker is exiting, look again within a millisecond: waiting up to 50 ms on the others' pipes left its
    // slot idle (a 1,000-point sweep of 80 ms points lost about 50 ms a point). Otherwise sleep until a pipe speaks.
    const int wait_ms = exiting ? 1 : 50;
    if (!fds.empty())
      ::poll(fds.data(), static_cast<nfds_t>(fds.size()), wait_ms);
    else if (!active.empty())
      ::usleep(static_cast<useconds_t>(wait_ms) * 1000);
    for (auto& w : active) {
      for (const auto& p : fds) {
        if (p.revents == 0)
          continue;
        if (p.fd == w.result_fd)
          read_some(w.result_fd, w.result, 0);
        else if (p.fd == w.log_fd)
          read_some(w.log_fd, w.log, LOG_TAIL_BYTES);
      }
    }
    for (auto it = active.begin(); it != active.end();) {
      Worker& w = *it;
      int status = 0;
      pid_t got = ::waitpid(w.pid, &status, WNOHANG);
      if (got == w.pid) {
        const WorkOutcome o = finish(w, status);
        const std::size_t item = w.item;
        it = active.erase(it);
        done(item, o);
        continue;
      }
      double elapsed = std::chrono::duration<double>(Clock::now() - w.start).count();
      if (elapsed > options.time_limit_s) {
        ::kill(w.pid, SIGKILL);
        ::waitpid(w.pid, &status, 0);
        drain(w);
        WorkOutcome o;
        o.status = WorkStatus::TIMED_OUT;
        o.wall_s = elapsed;
        o.message = "timed out: still running after the per-item limit of " + seconds_text(options.time_limit_s) +
                    " s, killed" + log_tail(w.log);
        const std::size_t item = w.item;
        it = active.erase(it);
        done(item, o);
        continue;
      }
      ++it;
    }
  }
}

} // namespace zerosim::core
