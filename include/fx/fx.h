#pragma once
/// \file
/// The whole public API of fxcpp.

#include <fx/argument.h>
#include <fx/error.h>
#include <fx/graph.h>
#include <fx/graph_module.h>
#include <fx/interpreter.h>
#include <fx/node.h>
#include <fx/target.h>
