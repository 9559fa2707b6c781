#include "cli/commands.hpp"

#include <iostream>

int main(int argc, char** argv)
{
  std::vector<std::string> args(argv + 1, argv + argc);
  return zerosim::cli::run_command(args, std::cout, std::cerr);
}
