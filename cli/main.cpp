#include <iostream>

#include "cli/app.hpp"

int main(int argc, char** argv) {
    cleave::cli::CliContext ctx{std::cout, std::cerr};
    return cleave::cli::run_cli(argc, argv, ctx);
}
