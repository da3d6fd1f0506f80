// A layering fixture, never compiled: the higher layer that tests/layering/engine/nn/upward.cpp reaches into.
#pragma once
