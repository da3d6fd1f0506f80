// A layering fixture, never compiled: a front end (ui) that includes the backend past the facade. The test
// layering.ui_refuses_backend_include runs cmake/CheckLayerIncludes.cmake over this folder with the front
// ends' layers and expects it refused; the run's include (train/) is allowed.
#include <QWidget>

#include "backend/backend.h"
#include "train/trainer.h"
