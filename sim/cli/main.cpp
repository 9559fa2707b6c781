#include "cli/commands.hpp"
#include "core/huge_pages.hpp"

#include <iostream>

int main(int argc, char** argv)
{
  zerosim::core::rerun_with_huge_page_heap(argv); // the same answer, in less time (core/huge_pages.hpp)
  std::vector<std::string> args(argv + 1, argv + argc);
  return zerosim::cli::run_command(args, std::cout, std::cerr);
}
