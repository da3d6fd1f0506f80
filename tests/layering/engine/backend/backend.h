// A layering fixture, never compiled: the backend that tests/layering/ui/upward.cpp and app/upward.cpp reach into.
#pragma once
